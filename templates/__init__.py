"""Project templates shipped with shardflow (cookiecutter folders; no Python API)."""
