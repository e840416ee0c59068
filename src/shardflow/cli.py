"""The ``shardflow`` command: list, create and check connectors; inspect a dataset; list
and clean what interrupted writes left at a destination.

Examples:
    $ shardflow connectors
    $ shardflow new-connector my_format --output-dir .
    $ shardflow check-connector my_format
    $ shardflow inspect s3://bucket/table/
    $ shardflow staging list s3://bucket/table/
    $ shardflow staging clean s3://bucket/table/

Exit codes: 0 success; 1 the command ran but found a problem (a failed check, an unknown
file format); 2 bad arguments (usage errors, unknown connector names, missing paths).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import posixpath
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_COMPRESSIONS = (".gz", ".bz2", ".zst", ".xz", ".lz4", ".snappy")
_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}


class UsageError(Exception):
    """Bad arguments: reported on stderr with exit code 2."""


def _out(text: str = "") -> None:
    print(text)


def _err(text: str) -> None:
    print(f"shardflow: error: {text}", file=sys.stderr)


# -- connectors -----------------------------------------------------------------------------


def cmd_connectors(args: argparse.Namespace) -> int:
    from shardflow.sdk.registry import get_registry

    registry = get_registry()
    specs, broken = registry.list(), registry.broken()
    if args.json:
        _out(
            json.dumps(
                {
                    "connectors": [
                        {"name": s.name, "package": s.package, "capabilities": list(s.capabilities)}
                        for s in specs
                    ],
                    "broken": broken,
                },
                indent=2,
            )
        )
        return EXIT_OK
    if not specs and not broken:
        _out(
            "No connectors registered. Install a connector package, or create one with "
            "'shardflow new-connector NAME'."
        )
        return EXIT_OK
    rows = [("NAME", "PACKAGE", "CAPABILITIES")]
    rows += [(s.name, s.package, ", ".join(s.capabilities) or "-") for s in specs]
    rows += [(name, "(broken)", reason) for name, reason in sorted(broken.items())]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    for name, package, caps in rows:
        _out(f"{name:<{widths[0]}}  {package:<{widths[1]}}  {caps}")
    return EXIT_OK


# -- new-connector --------------------------------------------------------------------------


def template_dir() -> Path | None:
    """The cookiecutter template shipped with shardflow: inside the package, or in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (
        here / "templates" / "connector",
        here.parents[1] / "templates" / "connector",
    ):
        if (candidate / "cookiecutter.json").is_file():
            return candidate
    return None


def cmd_new_connector(args: argparse.Namespace) -> int:
    name = args.name
    if not _NAME.fullmatch(name) or name.endswith("_"):
        raise UsageError(
            f"invalid connector name {name!r}: use lowercase letters, digits and underscores, "
            "starting with a letter (e.g. 'my_format')."
        )
    template = Path(args.template) if args.template else template_dir()
    if template is None or not (template / "cookiecutter.json").is_file():
        raise UsageError(
            f"no connector template at {template}; pass --template with the folder holding "
            "cookiecutter.json (templates/connector in the shardflow source)."
            if template is not None
            else "the connector template is not installed with this copy of shardflow; pass "
            "--template with the folder templates/connector of the shardflow source."
        )
    output_dir = Path(args.output_dir)
    slug = "shardflow-" + name.replace("_", "-")
    if (output_dir / slug).exists():
        raise UsageError(
            f"{output_dir / slug} already exists; choose another name or --output-dir."
        )
    try:
        from cookiecutter.main import cookiecutter
    except ImportError:
        _err("new-connector needs cookiecutter: pip install cookiecutter")
        return EXIT_PROBLEM
    context = {"connector_name": name}
    if args.description:
        context["description"] = args.description
    if args.author:
        context["author"] = args.author
    output_dir.mkdir(parents=True, exist_ok=True)
    project = cookiecutter(
        str(template), no_input=True, extra_context=context, output_dir=str(output_dir)
    )
    _out(f"Created {project}")
    _out("Next steps:")
    _out(f"  cd {project}")
    _out('  pip install -e ".[test]"')
    _out("  pytest                              # runs the conformance kit")
    _out(f"  shardflow check-connector {name}")
    return EXIT_OK


# -- check-connector ------------------------------------------------------------------------


def cmd_check_connector(args: argparse.Namespace) -> int:
    from shardflow.sdk.testing import describe_checks, find_conformance_suite, run_conformance

    if args.list_checks:
        for kind, lines in describe_checks().items():
            _out(f"{kind} checks:")
            for line in lines:
                _out(f"  {line}")
        return EXIT_OK
    if not args.name:
        raise UsageError("check-connector needs a connector NAME (see 'shardflow connectors').")
    try:
        suite = find_conformance_suite(args.name)
    except KeyError as exc:
        raise UsageError(exc.args[0] if exc.args else str(exc)) from None
    except (ImportError, LookupError) as exc:
        raise UsageError(str(exc)) from None
    try:
        report = run_conformance(suite, checks=args.check or None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report.suite = f"connector {args.name!r} ({report.suite})"
    _out(report.format(verbose=args.verbose))
    return EXIT_OK if report.ok else EXIT_PROBLEM


# -- inspect --------------------------------------------------------------------------------


def _format_of(path: str) -> str | None:
    name = posixpath.basename(path).lower()
    for suffix in _COMPRESSIONS:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return _FORMATS.get(posixpath.splitext(name)[1])


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def _list_files(fs: Any, root: str, path: str) -> list[tuple[str, int]]:
    if any(ch in root for ch in "*?["):
        found = fs.glob(root, detail=True)
        return sorted(
            (p, int(i.get("size") or 0)) for p, i in found.items() if i.get("type") == "file"
        )
    if not fs.exists(root):
        raise UsageError(f"{path}: no such file or folder.")
    if not fs.isdir(root):
        return [(root, int(fs.size(root) or 0))]
    base = root.rstrip("/")
    found = fs.find(base, detail=True)
    return sorted(
        (p, int(i.get("size") or 0))
        for p, i in found.items()
        if i.get("type", "file") == "file" and not _hidden(posixpath.relpath(p, base))
    )


def _read_summary(fmt: str, files: list[str], fs: Any) -> tuple[Any, int, str]:
    """(schema, rows, reader) through shardflow's file connector, else pyarrow.dataset."""
    import shardflow as sf

    reader = getattr(sf, f"read_{fmt}", None)
    if reader is not None:
        kwargs: dict[str, Any] = {"filesystem": fs}
        if "file_extensions" in inspect.signature(reader).parameters:
            # The files were chosen already: let through whatever extensions they have.
            names = [posixpath.basename(f) for f in files]
            kwargs["file_extensions"] = (
                None
                if not all("." in n for n in names)
                else sorted({n.split(".", 1)[1] for n in names})
            )
        dataset = reader(files, **kwargs)
        return dataset._arrow_schema(), dataset.count(), f"shardflow.read_{fmt}"
    import pyarrow.dataset as pads

    dataset = pads.dataset(files, format=fmt, filesystem=fs)
    return dataset.schema, dataset.count_rows(), "pyarrow.dataset"


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def cmd_inspect(args: argparse.Namespace) -> int:
    import fsspec

    options: dict[str, Any] = {}
    if args.storage_options:
        try:
            options = json.loads(args.storage_options)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--storage-options must be a JSON object: {exc}") from None
        if not isinstance(options, dict):
            raise UsageError("--storage-options must be a JSON object, e.g. '{\"anon\": true}'.")
    from shardflow.sdk.filesystems import with_client_defaults
    from shardflow.sdk.retry import call_with_retry
    from shardflow.sdk.storage_errors import StorageError, explain_storage_error

    try:
        fs, root = fsspec.core.url_to_fs(args.path, **options)
        fs = with_client_defaults(fs)
    except (ValueError, ImportError) as exc:
        raise UsageError(f"{args.path}: cannot open this location: {exc}") from None
    try:
        files = call_with_retry(
            lambda: _list_files(fs, root, args.path), description=f"list {args.path}"
        )
    except StorageError as exc:  # credentials, endpoint: one paragraph, no library traceback
        _err(str(exc))
        return EXIT_PROBLEM
    if not files:
        raise UsageError(f"{args.path}: no data files (hidden '.'/'_' files are not counted).")
    info: dict[str, Any] = {
        "path": args.path,
        "files": len(files),
        "size_bytes": sum(size for _, size in files),
    }
    formats = sorted({f for f in (_format_of(p) for p, _ in files) if f})
    fmt = args.format or (formats[0] if len(formats) == 1 else None)
    code = EXIT_OK
    if fmt is None:
        exts = sorted({posixpath.splitext(p)[1] or "(none)" for p, _ in files})
        if formats:
            info["error"] = (
                f"several formats here ({', '.join(formats)}); choose one with --format."
            )
        else:
            info["error"] = (
                f"unknown format (extensions: {', '.join(exts)}); known: "
                f"{', '.join(sorted(_FORMATS))}; choose one with --format."
            )
        code = EXIT_PROBLEM
    else:
        data_files = [p for p, _ in files if args.format or _format_of(p) == fmt]
        try:
            schema, rows, reader = _read_summary(fmt, data_files, fs)
        except Exception as exc:  # a corrupt file: say which, keep the listing
            explained = explain_storage_error(exc, args.path)
            info["error"] = (
                str(explained)
                if explained is not None
                else f"reading as {fmt} failed: {type(exc).__name__}: {exc}"
            )
            code = EXIT_PROBLEM
        else:
            info.update(
                {
                    "format": fmt,
                    "reader": reader,
                    "rows": rows,
                    "schema": [{"name": f.name, "type": str(f.type)} for f in schema],
                }
            )
            if len(data_files) != len(files):
                info["ignored_files"] = len(files) - len(data_files)
    _print_inspect(info, args.json)
    return code


def _print_inspect(info: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _out(json.dumps(info, indent=2))
        return
    _out(f"path     {info['path']}")
    if "format" in info:
        _out(f"format   {info['format']} (read with {info['reader']})")
    _out(
        f"files    {info['files']}"
        + (
            f" ({info['ignored_files']} of another format ignored)"
            if info.get("ignored_files")
            else ""
        )
    )
    _out(f"size     {_human(info['size_bytes'])} ({info['size_bytes']:,} bytes)")
    if "rows" in info:
        _out(f"rows     {info['rows']:,}")
        _out("schema")
        for field in info["schema"]:
            _out(f"  {field['name']}: {field['type']}")
    if "error" in info:
        _out(f"error    {info['error']}")


# -- staging ---------------------------------------------------------------------------------


def _destination(args: argparse.Namespace) -> tuple[Any, str]:
    """The filesystem and folder of a write destination, named as writes name it."""
    from shardflow.sdk.filesystems import resolve_paths

    options = _storage_options(args.storage_options)
    try:
        resolved = resolve_paths([args.path], None, options or None)
    except (ValueError, ImportError, TypeError) as exc:
        raise UsageError(f"{args.path}: cannot open this location: {exc}") from None
    return resolved.fs, resolved.paths[0].rstrip("/") or "/"


def cmd_staging_list(args: argparse.Namespace) -> int:
    from shardflow.sdk.filesystems import supports_rename
    from shardflow.sdk.staging import staging_report

    fs, dest = _destination(args)
    report = staging_report(fs, dest, beside=supports_rename(fs))
    if args.json:
        _out(json.dumps({"path": args.path, "entries": report}, indent=2))
        return EXIT_OK
    if not report:
        _out(f"{args.path}: no staging folders and no interrupted commit.")
        return EXIT_OK
    rows = [("KIND", "STATE", "FILES", "SIZE", "OWNER", "PATH")]
    for entry in report:
        size = "-" if entry["bytes"] is None else _human(entry["bytes"])
        rows.append(
            (
                entry["kind"],
                entry["state"],
                str(entry["files"]),
                size,
                entry["owner"],
                entry["path"],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        _out("  ".join(f"{cell:<{widths[i]}}" for i, cell in enumerate(row[:5])) + "  " + row[5])
    if any(e["state"] in ("abandoned", "interrupted") for e in report):
        _out(f"Run 'shardflow staging clean {args.path}' to finish and remove them.")
    return EXIT_OK


def cmd_staging_clean(args: argparse.Namespace) -> int:
    from shardflow.sdk.file_commit import clean_destination
    from shardflow.sdk.filesystems import display_path, supports_rename
    from shardflow.sdk.retry import RetryConfig
    from shardflow.sdk.staging import InterruptedCommitError

    fs, dest = _destination(args)
    try:
        finished, removed = clean_destination(
            fs, dest, RetryConfig(), beside=supports_rename(fs), force=args.force
        )
    except InterruptedCommitError as exc:
        _err(str(exc))
        return EXIT_PROBLEM
    for _ in range(finished):
        _out(f"finished the interrupted commit at {args.path}")
    for path in removed:
        _out(f"removed {display_path(fs, path)}")
    if not finished and not removed:
        _out(f"{args.path}: nothing to clean.")
    return EXIT_OK


def _storage_options(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--storage-options must be a JSON object: {exc}") from None
    if not isinstance(options, dict):
        raise UsageError("--storage-options must be a JSON object, e.g. '{\"anon\": true}'.")
    return options


# -- entry point ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardflow",
        description="shardflow connectors and datasets from the command line.",
        epilog="Exit codes: 0 ok, 1 a problem was found, 2 bad arguments.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("connectors", help="list registered connectors and their capabilities")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_connectors)

    p = sub.add_parser("new-connector", help="create a connector package from the template")
    p.add_argument("name", help="connector name: lowercase letters, digits, underscores")
    p.add_argument("--output-dir", default=".", help="where to create shardflow-NAME (default: .)")
    p.add_argument("--description", help="one line for the package metadata")
    p.add_argument("--author", help="author name for the package metadata")
    p.add_argument(
        "--template", help="a cookiecutter template folder to use instead of shardflow's"
    )
    p.set_defaults(func=cmd_new_connector)

    p = sub.add_parser(
        "check-connector", help="run the conformance kit against an installed connector"
    )
    p.add_argument("name", nargs="?", help="connector name (see 'shardflow connectors')")
    p.add_argument(
        "--check", action="append", metavar="CHECK", help="run only this check (repeatable)"
    )
    p.add_argument("--list-checks", action="store_true", help="list the checks and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="describe each check")
    p.set_defaults(func=cmd_check_connector)

    p = sub.add_parser("inspect", help="schema, rows, files and size of a dataset at a path or URL")
    p.add_argument(
        "path", help="a file, folder or glob; local or a URL such as s3://bucket/prefix/"
    )
    p.add_argument(
        "--format",
        choices=sorted(set(_FORMATS.values())),
        help="the file format, when the extensions do not tell",
    )
    p.add_argument("--storage-options", metavar="JSON", help="fsspec options as a JSON object")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "staging",
        help="list or clean what interrupted writes left at a destination",
        description="Staging folders of writes (inside a destination or beside it), the "
        "work a resumable write keeps for a rerun, and the marker of an interrupted commit.",
    )
    staging = p.add_subparsers(dest="staging_command", metavar="ACTION")
    staging.required = True
    for name, func, text in (
        ("list", cmd_staging_list, "list staging folders and interrupted commits"),
        (
            "clean",
            cmd_staging_clean,
            "finish interrupted commits and remove abandoned staging folders (including the "
            "work a resumable write kept: the next write then starts over)",
        ),
    ):
        q = staging.add_parser(name, help=text, description=text)
        q.add_argument("path", help="the destination folder of the writes, local or a URL")
        q.add_argument("--storage-options", metavar="JSON", help="fsspec options as JSON")
        if name == "list":
            q.add_argument("--json", action="store_true", help="print JSON")
        else:
            q.add_argument(
                "--force",
                action="store_true",
                help="also remove folders whose writer seems to be running",
            )
        q.set_defaults(func=func)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command on ``argv`` (default ``sys.argv[1:]``) and return its exit code."""
    os.environ.setdefault("SHARDFLOW_DISABLE_PROGRESS_BARS", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        _err(str(exc))
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
