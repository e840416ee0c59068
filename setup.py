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
EXTENSIONS = [
    Extension(
        f"shardflow.connectors.{package}.{name}",
        sources=[f"connectors/{package}/{name}.c"],
        depends=PARSER_HEADERS,
        include_dirs=[TEXT_PARSING],
        extra_compile_args=["-O3", "-std=gnu11"],
        optional=True,
    )
    for package, name in (("json", "_jsonl"), ("csv", "_csv"))
]
# Dictionary-encoded strings expanded for Parquet reads
# (connectors/parquet/dictionary_strings.py); optional too: without it Arrow decodes them.
EXTENSIONS.append(
    Extension(
        "shardflow.connectors.parquet._dictionary_strings",
        sources=["connectors/parquet/_dictionary_strings.c"],
        extra_compile_args=["-O3", "-std=gnu11"],
        optional=True,
    )
)
# Per-value encoders of the Parquet writer of flat columns (connectors/parquet/flat_writer.py);
# optional: without them every Parquet file is written by Arrow's writer.
EXTENSIONS.append(
    Extension(
        "shardflow.connectors.parquet._parquet_encode",
        sources=["connectors/parquet/_parquet_encode.c"],
        depends=["connectors/parquet/_parquet_inputs.h", "connectors/parquet/_parquet_rle.h"],
        extra_compile_args=["-O3", "-std=gnu11"],
        optional=True,
    )
)

# Pages of flat fixed-width columns decoded for Parquet reads (connectors/parquet/page_decoding.py);
# optional: without it Arrow decodes every column.
EXTENSIONS.append(
    Extension(
        "shardflow.connectors.parquet._parquet_decode",
        sources=["connectors/parquet/_parquet_decode.c"],
        extra_compile_args=["-O3", "-std=gnu11"],
        optional=True,
    )
)

# Rows and sums per group code in one pass, for group-bys (engine/execution/exchange/
# dense_groups.py); optional: without it NumPy's bincount counts and sums.
EXTENSIONS.append(
    Extension(
        "shardflow.engine.execution.exchange._grouped_sums",
        sources=["engine/execution/exchange/_grouped_sums.c"],
        extra_compile_args=["-O3", "-std=gnu11"],
        optional=True,
    )
)


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
