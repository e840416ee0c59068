"""Tracebacks of errors in user functions: the user's file, line and source text, the
operator's name, and no frame of shardflow's machinery, on every kind of worker; errors
raised by shardflow itself never claim to come from a user function."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import traceback

import pytest

import shardflow as sf
from shardflow.engine.execution.user_traceback import is_internal

THIS_FILE = os.path.abspath(__file__)


def divide_rows(row):
    return {"x": row["id"] / 0}  # raises


def divide_batches(batch):
    return {"x": batch["id"] + undefined}  # noqa: F821  # raises


class DividingModel:
    def __init__(self):
        self.factor = 0

    def __call__(self, batch):
        return {"x": batch["id"] + int("not a number")}  # raises


def _raising_line(fn) -> tuple[int, str]:
    """The line of ``fn`` (or of its ``__call__``) that raises, and its source text."""
    code = fn.__call__.__code__ if isinstance(fn, type) else fn.__code__
    lines = open(THIS_FILE).read().splitlines()
    for number in range(code.co_firstlineno, code.co_firstlineno + 5):
        if lines[number - 1].endswith("# raises"):
            return number, lines[number - 1].split("  #")[0].strip()
    raise AssertionError("no raising line found")


def _shown_frames(text: str) -> list[str]:
    return re.findall(r'File "([^"]+)", line \d+', text)


CASES = [
    ("map in worker processes", lambda ds: ds.map(divide_rows), divide_rows, "Map(divide_rows)"),
    (
        "map_batches in threads",
        lambda ds: ds.map_batches(divide_batches),
        divide_batches,
        "MapBatches(divide_batches)",
    ),
    (
        "actor pool",
        lambda ds: ds.map_batches(DividingModel, concurrency=1),
        DividingModel,
        "MapBatches(DividingModel)",
    ),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("label, build, fn, operator", CASES, ids=[c[0] for c in CASES])
def test_traceback_shows_user_code_only(backend, label, build, fn, operator):
    with pytest.raises(sf.UserCodeError) as info:
        build(sf.range(8, override_num_blocks=2)).take_all()
    error = info.value
    shown = "".join(traceback.format_exception(error))
    line, source = _raising_line(fn)
    assert f'File "{THIS_FILE}", line {line}' in shown
    assert source in shown
    assert operator in shown
    assert "Traceback from the user function" in str(error)
    frames = _shown_frames(shown)
    assert frames, shown
    assert not [f for f in frames if is_internal(f)], shown
    assert "<dynamic-code>" not in shown


def test_internal_frames_on_request(fresh_context):
    fresh_context.log_internal_stack_trace = True
    with pytest.raises(ZeroDivisionError) as info:
        sf.range(4).map_batches(lambda b: 1 / 0).take_all()
    shown = "".join(traceback.format_exception(info.value))
    assert any(is_internal(f) for f in _shown_frames(shown))
    assert "stages" in shown and "udf.py" in shown


def test_builtin_operator_error_does_not_claim_user_code():
    with pytest.raises(sf.UserCodeError) as info:
        sf.range(4).map_batches(lambda b: b).select_columns(["nope"]).take_all()
    message = str(info.value)
    assert "SelectColumns(['nope'])" in message and "['id']" in message
    assert "user function" not in message
    assert not [f for f in _shown_frames(message) if is_internal(f)]


def test_function_of_main_script_keeps_its_file(tmp_path):
    """A function defined in the script being run is pickled by value into worker
    processes; its frames still name the script and show its line."""
    script = tmp_path / "pipeline.py"
    script.write_text(
        textwrap.dedent(
            """
            import shardflow as sf

            def parse(row):
                return {"value": int("x" + str(row["id"]))}

            sf.range(4).map(parse).take_all()
            """
        )
    )
    env = dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1
    assert f'File "{script}", line 5, in parse' in done.stderr
    assert 'return {"value": int("x" + str(row["id"]))}' in done.stderr
    assert f'File "{script}", line 7, in <module>' in done.stderr
    assert "<dynamic-code>" not in done.stderr
    assert not [f for f in _shown_frames(done.stderr) if is_internal(f)], done.stderr
