"""examples/clickstream: the generator runs, the job counts clicks per page per minute into
Parquet, and the group's lag, as `herdless groups lag` shows it, falls to zero."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.spark.kafka import committed, create_topic, end_offsets, produce
from tests.support.cli import herdless, succeeded, table_rows

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream"
MINUTE_MS = 60_000
T0 = 1_700_000_040_000  # a minute boundary


def _job():
    spec = importlib.util.spec_from_file_location("clickstream_job", EXAMPLE / "job.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generator_produces_click_events(broker) -> None:
    create_topic(broker.bootstrap, "generated", 2)
    subprocess.run(
        [sys.executable, str(EXAMPLE / "generator.py"), "-b", broker.bootstrap]
        + ["--topic", "generated", "--count", "300", "--seed", "1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert sum(end_offsets(broker.bootstrap, "generated", 2).values()) == 300


def test_job_counts_per_page_per_minute_and_lag_falls_to_zero(spark, broker, tmp_path) -> None:
    create_topic(broker.bootstrap, "clicks", 3)
    pages = ["/", "/cart", "/checkout"]
    events = [
        {"user": f"u{i}", "page": pages[i % 3], "ts": T0 + minute * MINUTE_MS + i}
        for minute in range(3)
        for i in range(100 * (minute + 1))
    ]
    # A late event pushes the watermark past the three minutes, so they are final.
    events.append({"user": "u", "page": "/", "ts": T0 + 10 * MINUTE_MS})
    produce(
        broker.bootstrap,
        "clicks",
        ((e["user"].encode(), json.dumps(e).encode(), None) for e in events),
    )
    expected = Counter(
        (T0 // 1000 + (e["ts"] - T0) // MINUTE_MS * 60, e["page"]) for e in events[:-1]
    )

    query = _job().start(
        spark, broker.bootstrap, "clicks", "clickstream", tmp_path, available_now=True
    )
    query.awaitTermination(180)
    assert query.exception() is None

    rows = spark.read.parquet(str(tmp_path / "counts")).collect()
    got = {(int(r.minute.timestamp()), r.page): r.clicks for r in rows}
    assert got == dict(expected)

    assert committed(broker.bootstrap, "clickstream", "clicks", 3) == end_offsets(
        broker.bootstrap, "clicks", 3
    )
    # The same, as an operator sees it.
    lag = herdless("groups", "lag", "clickstream", "-b", broker.bootstrap)
    succeeded(lag)
    assert "total lag 0 over 3 partitions" in lag.stderr, lag.stderr
    # And per partition in `groups describe`: committed offset == log end offset, lag 0.
    described = succeeded(herdless("groups", "describe", "clickstream", "-b", broker.bootstrap))
    ends = end_offsets(broker.bootstrap, "clicks", 3)
    rows = [r[1:] for r in table_rows(described) if r[1] == "clicks"]
    offsets = {int(r[1]): (int(r[2]), int(r[3]), int(r[4])) for r in rows}
    assert offsets == {p: (end, end, 0) for p, end in ends.items()}, described
