"""Maps the top-level folders sdk/, connectors/ and engine/ into the shardflow package."""

from setuptools import find_packages, setup

FOLDERS = {"shardflow.sdk": "sdk", "shardflow.connectors": "connectors", "shardflow.engine": "engine"}
TEMPLATE_FILES = ["connector/*", "connector/**/*", "connector/**/.*"]


def _packages():
    packages = ["shardflow"] + [p for p in find_packages("src") if p.startswith("shardflow.")]
    for name, folder in FOLDERS.items():
        packages.append(name)
        packages += [f"{name}.{sub}" for sub in find_packages(folder)]
    return packages


setup(
    packages=_packages() + ["shardflow.templates"],
    package_dir={"shardflow": "src/shardflow", "shardflow.templates": "templates", **FOLDERS},
    package_data={"shardflow.templates": TEMPLATE_FILES},
    include_package_data=False,
)
