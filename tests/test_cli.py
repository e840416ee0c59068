"""The ``shardflow`` command: connectors, new-connector, check-connector, inspect.

Installed connector packages are simulated with real ``*.dist-info`` folders on a path added
to sys.path, so entry points load exactly as for a pip-installed package.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from shardflow.cli import main
from shardflow.sdk import registry as registry_module

# -- fake installed packages ------------------------------------------------------------------

GOOD_MODULE = """
import pyarrow as pa
from shardflow.sdk import BlockMetadata, ConnectorSpec, Datasource, ReadTask

TABLE = pa.table({"k": pa.array(list(range(12)), pa.int64())})


def _read(lo, hi):
    return [TABLE.slice(lo, hi - lo)]


class CliGoodDatasource(Datasource):
    def __init__(self, rows=12):
        self.rows = rows

    def get_read_tasks(self, parallelism, **kwargs):
        import functools
        return [
            ReadTask(functools.partial(_read, lo, min(lo + 4, self.rows)),
                     BlockMetadata(min(4, self.rows - lo), None))
            for lo in range(0, self.rows, 4)
        ]


def connector():
    return ConnectorSpec("cli_good", datasource=CliGoodDatasource)


def __getattr__(name):
    if name == "conformance":
        from shardflow.sdk.testing import DatasourceConformance

        class Suite(DatasourceConformance):
            check_in_subprocess = False

            def make_datasource(self, tmp_path):
                return CliGoodDatasource()

            def expected_table(self):
                return TABLE

            def make_empty_datasource(self, tmp_path):
                return CliGoodDatasource(0)

        return Suite
    raise AttributeError(name)
"""

LYING_MODULE = GOOD_MODULE.replace("cli_good", "cli_lying").replace(
    "BlockMetadata(min(4, self.rows - lo), None)", "BlockMetadata(4 + 1, None)"
)

PLAIN_MODULE = """
from shardflow.sdk import Datasource

class PlainDatasource(Datasource):
    def get_read_tasks(self, parallelism, **kwargs):
        return []
"""


def _dist(site: Path, dist: str, entry_points: dict, modules: dict) -> None:
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[shardflow.connectors]\n{lines}")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("cli_site")
    _dist(site, "cli-good", {"cli_good": "cli_good_pkg:connector"}, {"cli_good_pkg": GOOD_MODULE})
    _dist(
        site, "cli-lying", {"cli_lying": "cli_lying_pkg:connector"}, {"cli_lying_pkg": LYING_MODULE}
    )
    _dist(
        site,
        "cli-plain",
        {"cli_plain": "cli_plain_pkg:PlainDatasource"},
        {"cli_plain_pkg": PLAIN_MODULE},
    )
    _dist(
        site,
        "cli-broken",
        {"cli_broken": "cli_broken_pkg:connector"},
        {"cli_broken_pkg": "raise ImportError('needs libfoo >= 2')\n"},
    )
    _dist(site, "cli-dup-a", {"cli_dup": "cli_dup_a:PlainDatasource"}, {"cli_dup_a": PLAIN_MODULE})
    _dist(site, "cli-dup-b", {"cli_dup": "cli_dup_b:PlainDatasource"}, {"cli_dup_b": PLAIN_MODULE})
    return site


@pytest.fixture
def plugins(plugin_site, monkeypatch):
    """A fresh registry that sees the fake packages."""
    monkeypatch.syspath_prepend(str(plugin_site))
    monkeypatch.setattr(registry_module, "_REGISTRY", registry_module.ConnectorRegistry())
    return plugin_site


def _json_out(capsys):
    return json.loads(capsys.readouterr().out)


# -- connectors -------------------------------------------------------------------------------


def test_connectors_lists_packages_capabilities_and_broken_ones(plugins, capsys):
    assert main(["connectors", "--json"]) == 0
    listing = _json_out(capsys)
    by_name = {c["name"]: c for c in listing["connectors"]}
    assert by_name["cli_good"]["package"] == "cli-good"
    assert by_name["cli_good"]["capabilities"] == ["read"]
    assert by_name["cli_plain"]["capabilities"] == ["read"]
    broken = listing["broken"]
    assert "needs libfoo >= 2" in broken["cli_broken"] and "cli-broken" in broken["cli_broken"]
    assert "cli-dup-a" in broken["cli_dup"] and "cli-dup-b" in broken["cli_dup"]
    assert "cli_dup" not in by_name  # neither package wins silently

    assert main(["connectors"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["NAME", "PACKAGE", "CAPABILITIES"]
    assert any(line.split()[:2] == ["cli_broken", "(broken)"] for line in text.splitlines())


def test_connectors_in_code_are_listed(capsys, monkeypatch):
    monkeypatch.setattr(registry_module, "_REGISTRY", registry_module.ConnectorRegistry())
    from shardflow.connectors.range import RangeDatasource

    registry_module.register_connector("cli_range", datasource=RangeDatasource)
    assert main(["connectors", "--json"]) == 0
    listing = {c["name"]: c for c in _json_out(capsys)["connectors"]}
    assert listing["cli_range"] == {
        "name": "cli_range",
        "package": "<code>",
        "capabilities": ["read"],
    }


def test_broken_and_duplicate_connectors_do_not_break_import(plugin_site):
    env = dict(os.environ, PYTHONPATH=str(plugin_site))
    script = (
        "import shardflow as sf\n"
        "print(sf.read_datasource('cli_good').count())\n"
        "try:\n    sf.read_datasource('cli_dup')\nexcept Exception as e:\n    print('ERR', e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    count, error = proc.stdout.strip().splitlines()[-2:]
    assert count == "12"
    assert error.startswith("ERR") and "cli-dup-a" in error and "cli-dup-b" in error


# -- check-connector --------------------------------------------------------------------------


def test_check_connector_passes_a_conforming_package(plugins, capsys):
    assert main(["check-connector", "cli_good"]) == 0
    out = capsys.readouterr().out
    assert "ok   read_tasks_picklable" in out
    assert "skip projection_pushdown" in out
    summary = out.strip().splitlines()[-1]
    assert (
        re.fullmatch(r"\d+ passed, 0 failed, \d+ skipped", summary) and int(summary.split()[0]) >= 8
    ), summary


def test_check_connector_reports_failures_with_exit_1(plugins, capsys):
    assert main(["check-connector", "cli_lying", "--check", "metadata_consistent"]) == 1
    out = capsys.readouterr().out
    assert "FAIL metadata_consistent" in out and "num_rows=5" in out


@pytest.mark.parametrize(
    "name, words",
    [
        ("cli_nope", ["No connector named 'cli_nope'"]),
        ("cli_broken", ["needs libfoo >= 2"]),
        ("cli_dup", ["cli-dup-a", "cli-dup-b"]),
        ("cli_plain", ["ships no conformance suite", "cli_plain_pkg", "conformance"]),
    ],
)
def test_check_connector_bad_names_exit_2(plugins, capsys, name, words):
    assert main(["check-connector", name]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


def test_check_connector_unknown_check_and_listing(plugins, capsys):
    assert main(["check-connector", "cli_good", "--check", "nope"]) == 2
    assert "Unknown check" in capsys.readouterr().err
    assert main(["check-connector", "--list-checks"]) == 0
    out = capsys.readouterr().out
    assert "read checks:" in out and "write_round_trip:" in out


# -- new-connector ----------------------------------------------------------------------------


@pytest.fixture
def cookiecutter_config(tmp_path, monkeypatch):
    config = tmp_path / "cookiecutter.yaml"
    config.write_text(f"replay_dir: {tmp_path / 'replay'}\ncookiecutters_dir: {tmp_path / 'cc'}\n")
    monkeypatch.setenv("COOKIECUTTER_CONFIG", str(config))


def test_new_connector_creates_the_package(tmp_path, capsys, cookiecutter_config):
    out_dir = tmp_path / "work"
    assert main(["new-connector", "my_fmt", "--output-dir", str(out_dir), "--author", "Ada"]) == 0
    project = out_dir / "shardflow-my-fmt"
    assert f"Created {project}" in capsys.readouterr().out
    assert (project / "src" / "shardflow_my_fmt" / "datasource.py").is_file()
    assert (project / "tests" / "test_conformance.py").is_file()
    pyproject = (project / "pyproject.toml").read_text()
    assert 'my_fmt = "shardflow_my_fmt:connector"' in pyproject and '"Ada"' in pyproject
    compile(
        (project / "src" / "shardflow_my_fmt" / "datasink.py").read_text(), "datasink.py", "exec"
    )

    assert main(["new-connector", "my_fmt", "--output-dir", str(out_dir)]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["My-Format", "1abc", "with space", "trailing_"])
def test_new_connector_rejects_bad_names(tmp_path, capsys, name):
    assert main(["new-connector", name, "--output-dir", str(tmp_path)]) == 2
    assert "invalid connector name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_new_connector_missing_template(tmp_path, capsys):
    assert main(["new-connector", "x", "--template", str(tmp_path / "none")]) == 2
    assert "no connector template" in capsys.readouterr().err


# -- inspect ----------------------------------------------------------------------------------

TABLE = pa.table({"a": pa.array(range(100), pa.int64()), "b": [f"s{i}" for i in range(100)]})


def _parquet_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for i in range(3):
        pq.write_table(TABLE.slice(i * 40, 40), folder / f"part-{i}.parquet")
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-0.parquet.crc").write_text("x")
    return folder


def test_inspect_parquet_folder(tmp_path, capsys):
    folder = _parquet_folder(tmp_path / "pq")
    assert main(["inspect", str(folder), "--json"]) == 0
    info = _json_out(capsys)
    files = sorted(folder.glob("part-*.parquet"))
    assert info["files"] == 3
    assert info["size_bytes"] == sum(f.stat().st_size for f in files)
    assert info["rows"] == sum(pq.ParquetFile(f).metadata.num_rows for f in files) == 100
    assert info["format"] == "parquet"
    schema = pq.read_schema(files[0])
    assert info["schema"] == [{"name": f.name, "type": str(f.type)} for f in schema]

    assert main(["inspect", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "rows     100" in text and "  a: int64" in text and "files    3" in text


def test_inspect_csv_and_json_files(tmp_path, capsys):
    pacsv.write_csv(TABLE, tmp_path / "t.csv")
    assert main(["inspect", str(tmp_path / "t.csv"), "--json"]) == 0
    info = _json_out(capsys)
    assert (info["format"], info["files"], info["rows"]) == ("csv", 1, 100)
    assert [f["name"] for f in info["schema"]] == ["a", "b"]

    lines = tmp_path / "lines"
    lines.mkdir()
    (lines / "x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TABLE.to_pylist()[:7]))
    assert main(["inspect", str(lines), "--json"]) == 0
    info = _json_out(capsys)
    assert (info["format"], info["rows"]) == ("json", 7)


def test_inspect_glob_and_format_override(tmp_path, capsys):
    _parquet_folder(tmp_path / "pq")
    assert main(["inspect", str(tmp_path / "pq" / "part-[01].parquet"), "--json"]) == 0
    assert _json_out(capsys)["rows"] == 80
    pacsv.write_csv(TABLE, tmp_path / "t.txt")
    assert main(["inspect", str(tmp_path / "t.txt")]) == 1
    assert "unknown format" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "t.txt"), "--format", "csv", "--json"]) == 0
    assert _json_out(capsys)["rows"] == 100


def test_inspect_problems(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "missing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    mixed = _parquet_folder(tmp_path / "mixed")
    pacsv.write_csv(TABLE, mixed / "extra.csv")
    assert main(["inspect", str(mixed)]) == 1
    assert "several formats" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["inspect", str(tmp_path / "empty")]) == 2
    assert "no data files" in capsys.readouterr().err
    (tmp_path / "bad.parquet").write_bytes(b"not a parquet file at all")
    assert main(["inspect", str(tmp_path / "bad.parquet")]) == 1
    assert "reading as parquet failed" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path), "--storage-options", "[1]"]) == 2
    assert "JSON object" in capsys.readouterr().err
    assert main(["inspect", "nosuchproto://x/y"]) == 2
    assert "cannot open" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    for argv in ([], ["inspect"], ["frobnicate"], ["new-connector"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    capsys.readouterr()


@pytest.fixture(scope="module")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer("127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_inspect_s3_prefix(s3_endpoint, tmp_path, capsys):
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket="inspect-bucket")
    folder = _parquet_folder(tmp_path / "pq")
    sizes = 0
    for path in sorted(folder.iterdir()):
        client.upload_file(str(path), "inspect-bucket", f"table/{path.name}")
        sizes += path.stat().st_size if path.name.startswith("part-") else 0
    options = json.dumps(
        {
            "key": "testing",
            "secret": "testing",
            "skip_instance_cache": True,
            "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
        }
    )
    assert (
        main(["inspect", "s3://inspect-bucket/table/", "--storage-options", options, "--json"]) == 0
    )
    info = _json_out(capsys)
    assert (info["files"], info["size_bytes"], info["rows"]) == (3, sizes, 100)
    assert info["reader"] == "shardflow.read_parquet"
    assert main(["inspect", "s3://inspect-bucket/nothing/", "--storage-options", options]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_console_script_is_installed(tmp_path):
    script = Path(sys.executable).parent / "shardflow"
    if not script.exists():
        pytest.skip("the console script is not installed in this environment (pip install -e .)")
    proc = subprocess.run(
        [str(script), "inspect", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "no such file or folder" in proc.stderr


# -- staging ------------------------------------------------------------------------------------


class _FailAt:
    """Fails the batch holding row ``at`` while ``marker`` does not exist."""

    def __init__(self, marker, at):
        self.marker, self.at = marker, at

    def __call__(self, batch):
        if self.at in set(batch["id"].tolist()) and not os.path.exists(self.marker):
            raise RuntimeError("injected failure")
        return batch


def _staging_json(capsys, *args):
    capsys.readouterr()
    assert main(["staging", "list", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["entries"]


@pytest.mark.parametrize("where", ["local", "s3"])
def test_staging_list_and_clean_the_work_a_failed_resumable_write_kept(
    request, tmp_path, capsys, where
):
    import shardflow as sf

    store = request.getfixturevalue(f"{where}_store")
    dest = store.path("out")
    options = (
        ["--storage-options", json.dumps(store.storage_options)] if store.storage_options else []
    )
    marker = str(tmp_path / "fixed")
    ds = sf.range(40, override_num_blocks=4).map_batches(_FailAt(marker, 25))
    with pytest.raises(RuntimeError, match="injected failure"):
        ds.write_parquet(dest, resume=True, **store.options())
    (entry,) = _staging_json(capsys, dest, *options)
    assert entry["kind"] == "resumable" and entry["state"] == "abandoned"
    assert entry["files"] >= 3 and entry["bytes"] > 0  # journal, owner and staged files
    assert main(["staging", "list", dest, *options]) == 0
    assert "shardflow staging clean" in capsys.readouterr().out
    assert main(["staging", "clean", dest, *options]) == 0
    assert "removed" in capsys.readouterr().out
    assert _staging_json(capsys, dest, *options) == []
    open(marker, "w").close()
    ds.write_parquet(dest, resume=True, **store.options())  # starts over: every task runs
    got = sorted(sf.read_parquet(dest, **store.options()).to_pandas()["id"].tolist())
    assert got == list(range(40))


def test_staging_clean_finishes_an_interrupted_commit(local_store, capsys):
    import shardflow as sf
    from shardflow.sdk.staging import InterruptedCommitError

    dest = local_store.path("out")
    sf.range(10, override_num_blocks=2).write_parquet(dest)
    env = dict(os.environ, SHARDFLOW_TEST_KILL_AT_COMMIT_STEP="3")  # after the marker
    code = (
        "import shardflow as sf, sys; "
        "sf.range(100, override_num_blocks=3).write_parquet(sys.argv[1], mode='overwrite')"
    )
    child = subprocess.run([sys.executable, "-c", code, dest], env=env, timeout=120)
    assert child.returncode == -9
    entries = _staging_json(capsys, dest)
    assert [e["kind"] for e in entries] == ["commit", "write", "trash"]
    assert {e["state"] for e in entries} == {"interrupted"}
    with pytest.raises(InterruptedCommitError, match="shardflow staging clean"):
        sf.read_parquet(dest).count()
    assert main(["staging", "clean", dest]) == 0
    assert "finished the interrupted commit" in capsys.readouterr().out
    assert sorted(pq.read_table(dest).column("id").to_pylist()) == list(range(100))
    assert _staging_json(capsys, dest) == []


def test_staging_clean_leaves_a_running_write_alone_unless_forced(local_store, capsys):
    from shardflow.connectors.parquet import ParquetDatasink

    dest = local_store.path("out")
    sink = ParquetDatasink(dest)
    sink.on_write_start()  # this process is writing: its staging folder is in use
    (entry,) = _staging_json(capsys, dest)
    assert entry["state"] == "in use" and str(os.getpid()) in entry["owner"]
    assert main(["staging", "clean", dest]) == 0
    assert "nothing to clean" in capsys.readouterr().out
    assert main(["staging", "clean", dest, "--force"]) == 0
    assert _staging_json(capsys, dest) == []


def test_staging_usage_errors(tmp_path, capsys):
    assert main(["staging", "list", str(tmp_path), "--storage-options", "[1]"]) == 2
    assert "JSON object" in capsys.readouterr().err
    assert main(["staging", "list", str(tmp_path / "none")]) == 0
    assert "no staging folders" in capsys.readouterr().out
