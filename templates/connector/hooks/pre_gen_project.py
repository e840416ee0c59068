"""Refuse connector names that cannot be a Python module name and an entry point name."""

import re
import sys

NAME = "{{ cookiecutter.connector_name }}"

if not re.fullmatch(r"[a-z][a-z0-9_]*", NAME) or NAME.endswith("_"):
    sys.stderr.write(
        f"Invalid connector name {NAME!r}: use lowercase letters, digits and underscores, "
        "starting with a letter (e.g. 'my_format').\n"
    )
    sys.exit(1)
