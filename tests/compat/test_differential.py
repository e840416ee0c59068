"""Runs every registered differential case on ray.data and on shardflow and compares."""

from __future__ import annotations

import cases_a2a  # noqa: F401
import cases_actors  # noqa: F401
import cases_aggregate  # noqa: F401
import cases_api  # noqa: F401  (registers cases)
import cases_catalog  # noqa: F401
import cases_context  # noqa: F401
import cases_dataset_surface  # noqa: F401
import cases_delta  # noqa: F401
import cases_errors  # noqa: F401
import cases_expression_nodes  # noqa: F401
import cases_expressions  # noqa: F401
import cases_file_formats  # noqa: F401
import cases_frameworks  # noqa: F401
import cases_grouping  # noqa: F401
import cases_hudi  # noqa: F401
import cases_iceberg  # noqa: F401
import cases_interop  # noqa: F401
import cases_io  # noqa: F401
import cases_media  # noqa: F401
import cases_ml_formats  # noqa: F401
import cases_objects  # noqa: F401
import cases_observability  # noqa: F401
import cases_pandas  # noqa: F401
import cases_paths  # noqa: F401
import cases_preprocessor  # noqa: F401
import cases_random  # noqa: F401
import cases_reads  # noqa: F401
import cases_sql  # noqa: F401
import cases_surface  # noqa: F401
import cases_tensors  # noqa: F401
import cases_torch  # noqa: F401
import cases_types  # noqa: F401
import cases_writes  # noqa: F401
import pytest
from harness import CASES, compare


@pytest.mark.parametrize(
    "case_",
    [pytest.param(c, marks=[pytest.mark.slow] if c.slow else []) for c in CASES],
    ids=[c.name for c in CASES],
)
def test_same_as_ray_data(case_, rd, sfm, tmp_path):
    for library in case_.requires:
        pytest.importorskip(library)
    compare(case_, rd, sfm, tmp_path)
