"""The example of docs/connectors.md's Apache Hudi section runs."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "connectors.md"


def test_docs_example_runs():
    text = DOC.read_text()
    start = text.index("\n## Apache Hudi\n")
    end = text.index("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)
    assert blocks, "no example in the Apache Hudi section"
    exec(compile("\n".join(blocks), "docs/connectors.md (Apache Hudi)", "exec"), {})
