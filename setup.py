"""Maps the top-level folders sdk/, connectors/ and engine/ into the shardflow package.

Every folder of Python modules under them is a subpackage, with or without ``__init__.py``
(a folder missing from ``packages`` would import in an editable install and be absent from
the wheel); ``make test`` checks the wheel's contents against the source tree.
"""

from setuptools import Extension, find_namespace_packages, setup

FOLDERS = {
    "shardflow.sdk": "sdk",
    "shardflow.connectors": "connectors",
    "shardflow.engine": "engine",
}
# glob patterns skip hidden folders unless named: ".*" folders (e.g. .github) are listed too
TEMPLATE_FILES = [
    "connector/**/*",
    "connector/**/.*",
    "connector/**/.*/**/*",
    "connector/**/.*/**/.*",
]
NOT_PACKAGES = ["__pycache__", "*.__pycache__"]

# The C parsers of CSV and JSON Lines (connectors/csv/native.py, connectors/json/native.py),
# with the headers they share in connectors/_text_parsing/.
# Optional: where they do not compile, the install goes on and Arrow parses every file.
TEXT_PARSING = "connectors/_text_parsing"
PARSER_HEADERS = [
    f"{TEXT_PARSING}/_parse_numbers.h",
    f"{TEXT_PARSING}/_parse_python.h",
    f"{TEXT_PARSING}/_parse_text.h",
    "connectors/json/_jsonl_strings.h",
    "connectors/csv/_csv_rows.h",
]


def _extension(module: str, source: str, **kwargs) -> Extension:
    """An optional C extension: where it does not compile, the install goes on without it."""
    return Extension(
        module, sources=[source], extra_compile_args=["-O3", "-std=gnu11"], optional=True, **kwargs
    )


EXTENSIONS = [
    _extension(
        f"shardflow.connectors.{package}.{name}",
        f"connectors/{package}/{name}.c",
        depends=PARSER_HEADERS,
        include_dirs=[TEXT_PARSING],
    )
    for package, name in (("json", "_jsonl"), ("csv", "_csv"))
]
EXTENSIONS += [
    # Dictionary-encoded strings expanded for Parquet reads (connectors/parquet/
    # dictionary_strings.py); without it Arrow decodes them.
    _extension(
        "shardflow.connectors.parquet._dictionary_strings",
        "connectors/parquet/_dictionary_strings.c",
    ),
    # Per-value encoders of the Parquet writer of flat columns (connectors/parquet/
    # flat_writer.py); without them every Parquet file is written by Arrow's writer.
    _extension(
        "shardflow.connectors.parquet._parquet_encode",
        "connectors/parquet/_parquet_encode.c",
        depends=["connectors/parquet/_parquet_inputs.h", "connectors/parquet/_parquet_rle.h"],
    ),
    # Pages of flat columns decoded for Parquet reads (connectors/parquet/page_decoding.py);
    # without it Arrow decodes every column.
    _extension(
        "shardflow.connectors.parquet._parquet_decode",
        "connectors/parquet/_parquet_decode.c",
        depends=[
            "connectors/parquet/_parquet_page_header.h",
            "connectors/parquet/_parquet_rle_decode.h",
        ],
    ),
    # Rows and sums per group code in one pass, for group-bys (engine/execution/exchange/
    # dense_groups.py); without it NumPy's bincount counts and sums.
    _extension(
        "shardflow.engine.execution.exchange._grouped_sums",
        "engine/execution/exchange/_grouped_sums.c",
    ),
]


def _packages():
    found = find_namespace_packages("src", include=["shardflow.*"], exclude=NOT_PACKAGES)
    packages = ["shardflow", *found]
    for name, folder in FOLDERS.items():
        packages.append(name)
        subpackages = find_namespace_packages(folder, exclude=NOT_PACKAGES)
        packages += [f"{name}.{sub}" for sub in subpackages]
    return packages


setup(
    packages=[*_packages(), "shardflow.templates"],
    package_dir={"shardflow": "src/shardflow", "shardflow.templates": "templates", **FOLDERS},
    package_data={"shardflow": ["py.typed"], "shardflow.templates": TEMPLATE_FILES},
    include_package_data=False,
    ext_modules=EXTENSIONS,
)
