"""The connector template generates a package that installs, passes the kit, and is found by name.

The package is installed with pip into a folder under tmp_path (never into the running
environment) and used from subprocesses whose PYTHONPATH points there, as a user's
environment would after ``pip install shardflow-<name>``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shardflow.cli import template_dir

NAME = "tiny_lines"


def _config(root: Path) -> dict:
    """Keep cookiecutter's replay files and template cache under the test's folder."""
    return {"replay_dir": str(root / "replay"), "cookiecutters_dir": str(root / "cookiecutters")}


def _run(args, cwd=None, env=None, timeout=300):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _pip_install_target(package: Path, target: Path) -> None:
    args = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--target",
        str(target),
        str(package),
    ]
    if importlib.util.find_spec("wheel") is not None:
        args.insert(4, "--no-build-isolation")  # avoids fetching build tools when they are here
    proc = _run(args)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(project folder, environment with the installed package on PYTHONPATH)."""
    from cookiecutter.main import cookiecutter

    root = tmp_path_factory.mktemp("template")
    project = Path(
        cookiecutter(
            str(template_dir()),
            no_input=True,
            output_dir=str(root / "gen"),
            extra_context={"connector_name": NAME},
            default_config=_config(root),
        )
    )
    site = root / "site"
    _pip_install_target(project, site)
    env = dict(os.environ, PYTHONPATH=str(site), SHARDFLOW_DISABLE_PROGRESS_BARS="1")
    return project, site, env


@pytest.mark.slow
def test_generated_layout(installed):
    project, site, _ = installed
    assert project.name == "shardflow-tiny-lines"
    pyproject = (project / "pyproject.toml").read_text()
    assert '[project.entry-points."shardflow.connectors"]' in pyproject
    assert 'tiny_lines = "shardflow_tiny_lines:connector"' in pyproject
    assert '"shardflow"' in pyproject
    assert (site / "shardflow_tiny_lines" / "datasource.py").is_file()
    entry_points = next(site.glob("shardflow_tiny_lines-*.dist-info")) / "entry_points.txt"
    assert "tiny_lines = shardflow_tiny_lines:connector" in entry_points.read_text()
    assert "{{" not in "".join(p.read_text() for p in project.rglob("*.py"))


@pytest.mark.slow
def test_generated_project_is_lint_and_type_clean(installed):
    project, site, _ = installed
    assert (project / ".github" / "workflows" / "ci.yml").is_file()
    workflow = (project / ".github" / "workflows" / "ci.yml").read_text()
    assert "${{ matrix.python-version }}" in workflow  # Jinja left GitHub's expression alone
    assert all(step in workflow for step in ("ruff check", "ruff format --check", "mypy", "pytest"))
    assert (site / "shardflow_tiny_lines" / "py.typed").is_file()
    for check in (["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"]):
        proc = _run([sys.executable, "-m", *check], cwd=project)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_generated_tests_pass(installed):
    project, _, env = installed
    proc = _run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"],
        cwd=project,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout.strip().splitlines()[-1]
    assert " failed" not in summary and int(summary.split(" passed")[0].split()[-1]) >= 20, summary


_SCRIPT = """
import json, sys
import shardflow as sf
folder, out = sys.argv[1], sys.argv[2]
ds = sf.read_datasource("tiny_lines", path=folder)
rows = ds.filter(expr=sf.col("n") >= 2).select_columns(["word", "n"]).take_all()
ds.write_datasink("tiny_lines", path=out)
back = sf.read_datasource("tiny_lines", path=out).take_all()
print(json.dumps({"rows": rows, "count": ds.count(), "back": back}))
"""


@pytest.mark.slow
def test_found_through_the_entry_point(installed, tmp_path):
    _, _, env = installed
    data = tmp_path / "data"
    data.mkdir()
    records = [{"word": w, "n": i} for i, w in enumerate(["a", "bb", "ccc", "dddd", "eeeee"])]
    (data / "one.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:2]))
    (data / "two.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[2:]))
    (data / "_ignored.jsonl").write_text("not json\n")
    proc = _run([sys.executable, "-c", _SCRIPT, str(data), str(tmp_path / "out")], env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["count"] == len(records)
    assert sorted(result["rows"], key=lambda r: r["n"]) == [r for r in records if r["n"] >= 2]
    assert sorted(result["back"], key=lambda r: r["n"]) == records
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(written) >= 1 and all(
        n.startswith("part-") and n.endswith(".jsonl") for n in written
    )


@pytest.mark.slow
def test_cli_lists_and_checks_the_installed_connector(installed):
    _, _, env = installed
    cli = [sys.executable, "-c", "import sys; from shardflow.cli import main; sys.exit(main())"]
    proc = _run(cli + ["connectors", "--json"], env=env)
    assert proc.returncode == 0, proc.stderr
    listed = {c["name"]: c for c in json.loads(proc.stdout)["connectors"]}
    assert listed[NAME]["package"] == "shardflow-tiny-lines"
    assert set(listed[NAME]["capabilities"]) == {"read", "write", "projection"}
    proc = _run(cli + ["check-connector", NAME], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout and " 0 failed" in proc.stdout


def test_invalid_names_are_refused(tmp_path):
    from cookiecutter.exceptions import FailedHookException
    from cookiecutter.main import cookiecutter

    with pytest.raises(FailedHookException):
        cookiecutter(
            str(template_dir()),
            no_input=True,
            output_dir=str(tmp_path / "out"),
            extra_context={"connector_name": "Bad-Name"},
            default_config=_config(tmp_path),
        )
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
