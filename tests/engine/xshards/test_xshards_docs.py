"""The examples of docs/xshards.md (Orca's examples, as written apart from imports) run."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "xshards.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_doc_has_the_seed_examples():
    text = DOC.read_text()
    for call in (
        "transform_shard(func, *args)",
        "orca.data.SharedValue(item_set)",
        "full_data.transform_shard(func, item_set)",
        "collect()",
        "repartition(num_partitions)",
        "split()",
        "save_pickle(path, batchSize=10)",
        "XShards.load_pickle(path, minPartitions=None)",
        "to_ray()",
        "zoo.orca.data.pandas.read_csv(file_path",
        "zoo.orca.data.pandas.read_json(",
        "partition_by(cols=",
        "unique()",
        "zoo.orca.data.XShards.partition(data)",
    ):
        assert call in text, call


def test_examples_run(orca_backend, tmp_path, monkeypatch):
    backend = orca_backend
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    ran = 0
    for block in _blocks():
        if 'sf.init(backend="ray")' in block and backend != "ray":
            continue
        exec(compile(block, str(DOC), "exec"), namespace)
        ran += 1
    assert ran >= 10
