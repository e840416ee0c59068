"""Errors that say what to do and never show secrets: credentials in URLs are used but
redacted everywhere (messages, tracebacks, reprs, stats, logs)."""

from __future__ import annotations

import logging
import traceback

import pandas as pd
import pytest
from storage_fixtures import FAKE_KEY, FAKE_SECRET

import shardflow as sf

pytestmark = pytest.mark.timeout(120)


def _url(bucket: str, path: str) -> str:
    name = bucket[len("s3://") :]
    return f"s3://{FAKE_KEY}:{FAKE_SECRET}@{name}/{path}"


def _endpoint_only(s3_options):
    return {
        "client_kwargs": s3_options["client_kwargs"],
        "config_kwargs": s3_options["config_kwargs"],
    }


def test_credentials_in_s3_urls_are_used_and_never_shown(s3_bucket, s3_options, caplog):
    caplog.set_level(logging.DEBUG)
    options = _endpoint_only(s3_options)
    url = _url(s3_bucket, "table")
    sf.from_pandas(pd.DataFrame({"a": [1, 2, 3]})).write_parquet(url, storage_options=options)
    ds = sf.read_parquet(url, storage_options=options)
    assert ds.sum("a") == 6
    shown = [repr(ds), str(ds), ds.stats(), ds.input_files()]
    with pytest.raises(Exception) as missing:
        sf.read_parquet(_url(s3_bucket, "nothing/here.parquet"), storage_options=options).count()
    with pytest.raises(Exception) as exists:
        sf.from_pandas(pd.DataFrame({"a": [1]})).write_parquet(url, storage_options=options)
    for error in (missing, exists):
        shown.append(str(error.value))
        shown.append("".join(traceback.format_exception(error.type, error.value, error.tb)))
    shown.append(caplog.text)
    for text in shown:
        assert FAKE_SECRET not in str(text)
    assert "here.parquet" in str(missing.value)  # the error still names the file


def test_udf_argument_types_are_checked_when_the_method_is_called():
    ds = sf.range(3)
    with pytest.raises(TypeError, match="fn_args"):
        ds.map_batches(lambda b, x: b, fn_args=5)
    with pytest.raises(TypeError, match="fn_kwargs"):
        ds.map(lambda r: r, fn_kwargs=[("a", 1)])
    with pytest.raises(ValueError, match="callable class"):
        ds.map(lambda r: r, fn_constructor_args=(1,))


def test_a_fifo_is_refused_instead_of_read_forever(tmp_path):
    import os

    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO"):
        sf.read_csv(str(fifo)).take_all()


@pytest.mark.timeout(120)  # catches a hang: the stage sleeps far longer than this
def test_a_stage_without_progress_fails_naming_itself():
    import time

    sf.DataContext.get_current().no_progress_timeout_s = 1.0

    def stuck(batch):
        time.sleep(600)
        return batch

    with pytest.raises(TimeoutError, match=r"MapBatches\(stuck\) waits for"):
        sf.range(4, override_num_blocks=2).map_batches(stuck).take_all()
