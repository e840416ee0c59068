"""The public names of ``import shardflow``: listed once each, loaded on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import shardflow


def test_every_public_name_has_a_module_and_resolves():
    exported = set(shardflow._EXPORTS)
    assert set(shardflow.__all__) == exported
    for name in sorted(exported):
        module = importlib.import_module(shardflow._EXPORTS[name])
        assert getattr(shardflow, name) is getattr(module, name), name
    assert set(shardflow.__all__) <= set(dir(shardflow))


def test_import_shardflow_loads_no_engine_module():
    code = (
        "import sys\n"
        "import shardflow\n"
        "print(sorted(m for m in sys.modules if m.startswith('shardflow.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # only the module that chooses Arrow's memory pool before pyarrow loads (it imports
    # nothing but os and sys)
    assert out.stdout.strip() == "['shardflow._arrow_pool']"
