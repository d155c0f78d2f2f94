"""PartitionLog.read_records: the bytes read() returns, as a region of one segment file
where they lie in one, to be sent from the file."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.protocol.regions import FileRegion
from herdless.storage import LogConfig, PartitionLog
from tests.storage.batches import batch, offsets_of, split
from tests.storage.conftest import OpenLog


def materialized(records: bytes | FileRegion) -> bytes:
    if isinstance(records, FileRegion):
        try:
            return records.read()
        finally:
            records.close()
    return records


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 300)), min_size=1, max_size=25),
    segment_bytes=st.integers(400, 3000),
    index_interval=st.sampled_from([0, 1, 200, 4096]),
    reads=st.lists(
        st.tuples(st.floats(0, 1), st.integers(1, 4000), st.one_of(st.none(), st.floats(0, 1))),
        min_size=1,
        max_size=15,
    ),
)
def test_read_records_holds_what_read_returns(
    sizes: list[tuple[int, int]],
    segment_bytes: int,
    index_interval: int,
    reads: list[tuple[float, int, float | None]],
) -> None:
    config = LogConfig.from_topic_configs(
        {"segment.bytes": str(segment_bytes), "index.interval.bytes": str(index_interval)}
    )
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog.open(Path(tmp) / "t-0", "t", 0, config, 0)
        try:
            for count, size in sizes:
                log.append(split(batch(count, size=size)), 0)
            end = log.log_end_offset
            for offset_at, max_bytes, max_offset_at in reads:
                offset = int(offset_at * end)
                max_offset = None if max_offset_at is None else offset + int(max_offset_at * end)
                expected = log.read(offset, max_bytes, max_offset=max_offset)
                got = log.read_records(offset, max_bytes, max_offset=max_offset)
                assert materialized(got) == expected
        finally:
            log.close()


def test_a_read_within_one_segment_is_a_region(open_log: OpenLog) -> None:
    raw = batch(3, size=50)
    log = open_log(segment_bytes=str(3 * len(raw)), index_interval_bytes="1")
    for _ in range(6):
        log.append(split(raw), 0)
    inside = log.read_records(0, 2 * len(raw))
    assert isinstance(inside, FileRegion) and len(inside) == 2 * len(raw)
    assert offsets_of(materialized(inside)) == list(range(6))
    # From the second batch of the first segment on, a copy would read on into the next.
    across = log.read_records(3, 10 * len(raw))
    assert isinstance(across, bytes)
    assert offsets_of(across) == list(range(3, 18))
    small = log.read_records(0, 2 * len(raw), min_region_bytes=2 * len(raw) + 1)
    assert isinstance(small, bytes) and offsets_of(small) == list(range(6))


def test_a_region_outlives_its_segment(open_log: OpenLog) -> None:
    raw = batch(3, size=50)
    log = open_log(segment_bytes=str(2 * len(raw)))
    for _ in range(4):
        log.append(split(raw), 0)
    region = log.read_records(0, 2 * len(raw))
    assert isinstance(region, FileRegion)
    expected = log.read(0, 2 * len(raw))
    # Retention deletes the segment and closes its descriptor; the region keeps its own.
    log.delete_records(6)
    log.apply_retention(0)
    log.delete()
    assert materialized(region) == expected
