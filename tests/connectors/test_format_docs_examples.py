"""The examples of docs/connectors.md's WebDataset, TFRecords, Avro, ORC, Zarr, MCAP and LeRobot sections
run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "connectors.md"


def _section_code(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.index("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)
    assert blocks, f"no example in the {title} section"
    return "\n".join(blocks)


@pytest.mark.parametrize(
    "title, needs",
    [
        ("WebDataset", "PIL"),
        ("TFRecords", "google_crc32c"),
        ("Avro", "fastavro"),
        ("ORC", "pyarrow.orc"),
        ("Zarr", "zarr"),
        ("MCAP", "mcap"),
        ("LeRobot", "av"),
    ],
)
def test_section_example_runs(title, needs):
    pytest.importorskip(needs)
    exec(compile(_section_code(title), f"docs/connectors.md ({title})", "exec"), {})
