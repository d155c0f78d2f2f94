"""The coordinator's batches take a shorter path through PartitionLog.append: one keyed
batch built in this process (records.build_batch), without a producer, to a topic that
stores batches as given. Whichever path a batch takes, the log must end up the same."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from herdless.protocol.records import build_batch
from herdless.storage import InvalidTimestamp, PartitionLog, RecordTooLarge
from herdless.storage.errors import InvalidProducerEpoch
from herdless.storage.log import AppendInfo
from tests.storage.batches import build, split
from tests.storage.conftest import OpenLog

# Small segments and a dense index, so that the batches below roll segments and
# write index entries on both paths.
SHAPE = {"segment_bytes": "700", "index_interval_bytes": "100"}


@pytest.fixture
def short_path(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the appends that took the short path: a test that compares the paths
    must know that it compared them."""
    taken: list[int] = []
    real = PartitionLog._append_built

    def counted(self: PartitionLog, *args: Any) -> AppendInfo:
        taken.append(1)
        return real(self, *args)

    monkeypatch.setattr(PartitionLog, "_append_built", counted)
    return taken


def commits(count: int) -> list[bytes]:
    """Batches shaped like the coordinator's: 1-4 keyed records, growing values."""
    return [
        build_batch([(b"key-%d-%d" % (i, j), b"v" * (i + j)) for j in range(i % 4 + 1)], 5_000 + i)
        for i in range(count)
    ]


def files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def outcome(append: Callable[[], AppendInfo]) -> AppendInfo | str:
    try:
        return append()
    except (RecordTooLarge, InvalidTimestamp) as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("cleanup_policy", ["delete", "compact"])
def test_built_batches_are_stored_as_any_batch_is(
    open_log: OpenLog, tmp_path: Path, short_path: list[int], cleanup_policy: str
) -> None:
    short = open_log(name="short", cleanup_policy=cleanup_policy, **SHAPE)
    general = open_log(name="general", cleanup_policy=cleanup_policy, **SHAPE)
    for i, raw in enumerate(commits(60)):
        # No epoch (a log outside replication), then three leader epochs.
        epoch = None if i < 10 else 1 + i // 20
        now = 9_000 + i
        got = short.append(split(raw), now, leader_epoch=epoch, keyed=True)
        assert got == general.append(split(raw), now, leader_epoch=epoch)
    assert len(short_path) == 60
    assert short.log_end_offset == general.log_end_offset == sum(i % 4 + 1 for i in range(60))
    assert short.segment_base_offsets == general.segment_base_offsets
    assert len(short.segment_base_offsets) > 3
    assert short.leader_epoch_entries == general.leader_epoch_entries
    assert [e.epoch for e in short.leader_epoch_entries] == [1, 2, 3]
    assert short.read(0, 1 << 20) == general.read(0, 1 << 20)
    short.close()
    general.close()
    assert files(tmp_path / "short") == files(tmp_path / "general")
    # And what was written reads back after a restart: offsets, epochs, the end.
    again = open_log(name="short", cleanup_policy=cleanup_policy, **SHAPE)
    assert again.log_end_offset == 150
    assert again.offset_for_timestamp(5_059) is not None


@pytest.mark.parametrize(
    "configs",
    [
        {"message_timestamp_type": "LogAppendTime"},
        {"compression_type": "gzip"},
        {"message_timestamp_after_max_ms": "20"},
        {"message_timestamp_before_max_ms": "3000"},
    ],
    ids=["log-append-time", "recompressed", "after-bound", "before-bound"],
)
def test_topics_that_change_or_check_batches_take_the_general_path(
    open_log: OpenLog, tmp_path: Path, short_path: list[int], configs: dict[str, str]
) -> None:
    keyed = open_log(name="keyed", **SHAPE, **configs)
    general = open_log(name="general", **SHAPE, **configs)
    outcomes = []
    for i, raw in enumerate(commits(20)):
        now = 5_000 + i * 200
        got = outcome(lambda: keyed.append(split(raw), now, leader_epoch=0, keyed=True))  # noqa: B023
        assert got == outcome(lambda: general.append(split(raw), now, leader_epoch=0))  # noqa: B023
        outcomes.append(isinstance(got, AppendInfo))
    assert not short_path
    assert any(outcomes)
    keyed.close()
    general.close()
    assert files(tmp_path / "keyed") == files(tmp_path / "general")


def test_a_built_batch_over_max_message_bytes_is_refused_as_any_is(
    open_log: OpenLog, tmp_path: Path, short_path: list[int]
) -> None:
    keyed = open_log(name="keyed", max_message_bytes="150")
    general = open_log(name="general", max_message_bytes="150")
    refused = 0
    for raw in commits(8):
        got = outcome(lambda: keyed.append(split(raw), 0, keyed=True))  # noqa: B023
        assert got == outcome(lambda: general.append(split(raw), 0))  # noqa: B023
        refused += isinstance(got, str)
    assert 0 < refused < 8
    assert len(short_path) == 8 - refused
    keyed.close()
    general.close()
    assert files(tmp_path / "keyed") == files(tmp_path / "general")


def test_a_keyed_batch_with_a_producer_is_the_coordinators_own(
    open_log: OpenLog, short_path: list[int]
) -> None:
    """Keyed batches are the broker's coordinator's (a TxnOffsetCommit's), written at
    sequence 0 each time, as Kafka's coordinator writes them: only their epoch is
    checked, so the same shape twice is two writes, and an older epoch is refused."""
    log = open_log()
    raw = build([b"a", b"b"], keys=[b"k", b"l"], producer_id=7, producer_epoch=1, base_sequence=0)
    first = log.append(split(raw), 0, keyed=True)
    again = log.append(split(raw), 0, keyed=True)
    assert not first.duplicate and not again.duplicate
    assert (again.first_offset, again.last_offset) == (2, 3) and log.log_end_offset == 4
    older = build([b"c"], keys=[b"m"], producer_id=7, producer_epoch=0, base_sequence=0)
    with pytest.raises(InvalidProducerEpoch):
        log.append(split(older), 0, keyed=True)
    assert log.log_end_offset == 4
    assert not short_path
