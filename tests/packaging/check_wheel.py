"""Check a built shardflow wheel against the source tree: ``python check_wheel.py WHEEL``.

The wheel must hold every module of src/shardflow, sdk/, connectors/ and engine/ (folders with
or without ``__init__.py``), the compiled CSV and JSON Lines parsers (optional extensions,
built wherever a C compiler is), every file of templates/ (dotfiles included), ``py.typed``, the
version of ``shardflow.__version__`` and core requirements without any extra's package.
Exits non-zero with one line per problem.
"""

from __future__ import annotations

import ast
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = {
    "src/shardflow": "shardflow",
    "sdk": "shardflow/sdk",
    "connectors": "shardflow/connectors",
    "engine": "shardflow/engine",
}
TEMPLATES = ("templates", "shardflow/templates")
OPTIONAL_PACKAGES = (
    "ray",
    "torch",
    "pillow",
    "s3fs",
    "gcsfs",
    "pyiceberg",
    "daft",
    "datasets",
    "pyspark",
)
SKIPPED_PARTS = {"__pycache__"}
# Optional compiled extensions, which a build on this project's machines must produce.
COMPILED_MODULES = (
    "shardflow/connectors/json/_jsonl.",
    "shardflow/connectors/csv/_csv.",
    "shardflow/connectors/parquet/_dictionary_strings.",
    "shardflow/connectors/parquet/_parquet_encode.",
)


def source_version(root: Path = ROOT) -> str:
    """``shardflow.__version__``, read from the source without importing it."""
    tree = ast.parse((root / "src" / "shardflow" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return str(ast.literal_eval(node.value))
    raise ValueError("src/shardflow/__init__.py has no __version__")


def expected_files(root: Path = ROOT) -> set[str]:
    """Paths inside the wheel that the source tree says must be there."""
    expected = set()
    for folder, target in SOURCE_FOLDERS.items():
        for path in (root / folder).rglob("*.py"):
            relative = path.relative_to(root / folder)
            if not SKIPPED_PARTS & set(relative.parts):
                expected.add(f"{target}/{relative.as_posix()}")
    folder, target = TEMPLATES
    for path in (root / folder).rglob("*"):
        relative = path.relative_to(root / folder)
        skipped = SKIPPED_PARTS & set(relative.parts) or path.suffix == ".pyc"
        if path.is_file() and not skipped:
            expected.add(f"{target}/{relative.as_posix()}")
    expected.add("shardflow/py.typed")
    return expected


def problems(wheel: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with ``wheel``; empty when it is complete."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        metadata = archive.read(metadata_name).decode() if metadata_name else ""
    found = [f"missing from the wheel: {name}" for name in sorted(expected_files(root) - names)]
    for module in COMPILED_MODULES:
        if not any(n.startswith(module) and n.endswith((".so", ".pyd")) for n in names):
            found.append(
                f"missing from the wheel: the compiled module {module}*.so; did its C file "
                "compile? (pip install -v shows the compiler's errors)"
            )
    version = source_version(root)
    if f"\nVersion: {version}\n" not in metadata:
        found.append(f"METADATA does not say Version: {version}")
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            requirement = line.split(":", 1)[1].strip().lower()
            if requirement.startswith(OPTIONAL_PACKAGES):
                found.append(f"core requirement of an optional package: {requirement}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check_wheel.py WHEEL", file=sys.stderr)
        return 2
    wheel = Path(argv[0])
    found = problems(wheel)
    for problem in found:
        print(f"{wheel.name}: {problem}", file=sys.stderr)
    if not found:
        print(f"{wheel.name}: complete ({len(expected_files())} source files checked)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
