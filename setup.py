"""Maps the top-level folders sdk/, connectors/ and engine/ into the shardflow package."""

from setuptools import find_packages, setup

FOLDERS = {"shardflow.sdk": "sdk", "shardflow.connectors": "connectors", "shardflow.engine": "engine"}


def _packages():
    packages = ["shardflow"] + [p for p in find_packages("src") if p.startswith("shardflow.")]
    for name, folder in FOLDERS.items():
        packages.append(name)
        packages += [f"{name}.{sub}" for sub in find_packages(folder)]
    return packages


setup(
    package_dir={"shardflow": "src/shardflow", **FOLDERS},
    packages=_packages(),
)
