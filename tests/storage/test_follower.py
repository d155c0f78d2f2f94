"""A follower's log built from a leader's reads: append_as_follower."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from herdless.protocol.records import parse_header
from herdless.storage import (
    CorruptRecord,
    EpochEntry,
    OffsetsOutOfOrder,
    PartitionLog,
    UnexpectedAppendOffset,
)
from herdless.storage.log.local_log import PRODUCER_SNAPSHOT_FILE
from herdless.storage.producer_state import read_producer_snapshot
from tests.storage.batches import (
    GZIP,
    NONE,
    batch,
    build,
    offsets_of,
    restamped,
    split,
    stored_batches,
)
from tests.storage.conftest import OpenLog

CONFIGS = {"segment_bytes": "700", "index_interval_bytes": "150"}
PRODUCER = 7


def fill_leader(leader: PartitionLog, epochs: list[int]) -> list[bytes]:
    """One append per epoch given, idempotent every other one; returns the producer's batches."""
    sequence = 0
    produced = []
    for i, epoch in enumerate(epochs):
        count = 1 + i % 3
        fields = {}
        if i % 2:
            fields = {"producer_id": PRODUCER, "producer_epoch": 0, "base_sequence": sequence}
            sequence += count
        raw = batch(
            count,
            size=20 + 10 * (i % 5),
            first_timestamp=1_000 + 10 * i,
            compression=GZIP if i % 4 == 0 else NONE,
            **fields,
        )
        leader.append(split(raw), 0, leader_epoch=epoch)
        if fields:
            produced.append(raw)
    return produced


def replicate(leader: PartitionLog, follower: PartitionLog, max_bytes: int) -> int:
    """Fetch from the leader at the follower's log end until caught up; returns the fetches.

    Each fetch also carries the start of the next batch, as a fetch cut short by its size does.
    """
    fetches = 0
    while follower.log_end_offset < leader.log_end_offset:
        offset = follower.log_end_offset
        whole = leader.read(offset, max_bytes)
        longer = leader.read(offset, len(whole) + max_bytes)
        data = longer[: len(whole) + min(40, len(longer) - len(whole))]
        info = follower.append_as_follower(data, now_ms=0)
        assert (info.first_offset, info.last_offset + 1) == (offset, follower.log_end_offset)
        fetches += 1
    return fetches


def segment_files(directory: Path) -> dict[str, bytes]:
    kept = (".log", ".index", ".timeindex")
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in kept}


def test_a_follower_copy_is_identical_to_its_leader(open_log: OpenLog, tmp_path: Path) -> None:
    leader = open_log(name="leader-0", **CONFIGS)
    follower = open_log(name="follower-0", **CONFIGS)
    produced = fill_leader(leader, [0, 0, 0, 1, 1, 3, 3, 3, 3, 4] + [6] * 14)
    assert len(leader.segment_base_offsets) > 3
    assert replicate(leader, follower, max_bytes=300) > 3
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.segment_base_offsets == leader.segment_base_offsets
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.leader_epoch_entries == leader.leader_epoch_entries
    assert [e.epoch for e in follower.leader_epoch_entries] == [0, 1, 3, 4, 6]
    assert follower.producers.entry(PRODUCER) == leader.producers.entry(PRODUCER)
    leader.close()
    follower.close()
    assert segment_files(tmp_path / "follower-0") == segment_files(tmp_path / "leader-0")
    for name in ("leader-epoch-checkpoint",):
        assert (tmp_path / "follower-0" / name).read_bytes() == (
            tmp_path / "leader-0" / name
        ).read_bytes()

    # Promoted, the follower recognises a retry of what the old leader acknowledged.
    promoted = open_log(name="follower-0", **CONFIGS)
    end = promoted.log_end_offset
    retry = promoted.append(split(produced[-1]), 0, leader_epoch=7)
    assert retry.duplicate and retry.last_offset < end
    assert promoted.log_end_offset == end
    assert promoted.append(split(batch(1)), 0, leader_epoch=7).first_offset == end
    assert promoted.leader_epoch_entries[-1] == EpochEntry(7, end)


def test_batches_already_held_are_skipped(open_log: OpenLog) -> None:
    leader = open_log(name="leader-0")
    follower = open_log(name="follower-0")
    for epoch in (1, 1, 2):
        leader.append(split(batch(2)), 0, leader_epoch=epoch)
    follower.append_as_follower(leader.read(0, 1 << 20), 0)
    again = follower.append_as_follower(leader.read(0, 1 << 20), 0)
    assert (again.first_offset, again.last_offset) == (6, 5)
    leader.append(split(batch(3)), 0, leader_epoch=2)
    info = follower.append_as_follower(leader.read(2, 1 << 20), 0)
    assert (info.first_offset, info.last_offset) == (6, 8)
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.append_as_follower(b"", 0).last_offset == 8


def test_a_batch_straddling_the_log_end_is_refused(open_log: OpenLog) -> None:
    follower = open_log(name="follower-0")
    follower.append_as_follower(restamped(batch(5), leader_epoch=1), 0)
    other = restamped(batch(3), leader_epoch=1) + restamped(batch(5), base_offset=3, leader_epoch=2)
    with pytest.raises(UnexpectedAppendOffset, match="straddles") as refused:
        follower.append_as_follower(other, 0)
    assert (refused.value.first_offset, refused.value.last_offset) == (3, 7)
    assert follower.log_end_offset == 5
    assert follower.leader_epoch_entries == [EpochEntry(1, 0)]


@pytest.mark.parametrize(
    "bases",
    [
        pytest.param([3, 0], id="backwards"),
        pytest.param([0, 0], id="the same batch twice"),
        pytest.param([0, 2], id="overlapping"),
    ],
)
def test_offsets_that_do_not_increase_are_refused(open_log: OpenLog, bases: list[int]) -> None:
    follower = open_log(name="follower-0")
    data = b"".join(restamped(batch(3), base_offset=base) for base in bases)
    with pytest.raises(OffsetsOutOfOrder):
        follower.append_as_follower(data, 0)
    assert follower.log_end_offset == 0


def test_gaps_left_by_a_compacted_leader_are_kept(open_log: OpenLog) -> None:
    follower = open_log(name="follower-0")
    data = b"".join(
        restamped(batch(2, key=b"k"), base_offset=base, leader_epoch=1) for base in (0, 10, 13)
    )
    info = follower.append_as_follower(data, 0)
    assert (info.first_offset, info.last_offset) == (0, 14)
    assert offsets_of(follower.read(0, 1 << 20)) == [0, 1, 10, 11, 13, 14]
    assert offsets_of(follower.read(5, 1)) == [10, 11]
    follower.close()
    # The gaps are in the active segment, which recovery checks after a restart.
    again = open_log(name="follower-0")
    assert again.log_end_offset == 15
    assert offsets_of(again.read(0, 1 << 20)) == [0, 1, 10, 11, 13, 14]


def test_a_gap_past_the_indexes_reach_starts_a_segment(open_log: OpenLog) -> None:
    follower = open_log(name="follower-0", segment_bytes="200")
    far = 3_000_000_000
    data = b"".join(restamped(batch(5), base_offset=base) for base in (0, 10, far, far + 10))
    follower.append_as_follower(data, 0)
    # Segments are named by the batch that starts them, as in Kafka.
    assert follower.segment_base_offsets == [0, 10, far, far + 10]
    # An empty log too: its first segment stays, the log starting where it did.
    empty = open_log(name="empty-0")
    empty.append_as_follower(restamped(batch(2), base_offset=far), 0)
    assert empty.segment_base_offsets == [0, far]
    assert (empty.log_start_offset, empty.log_end_offset) == (0, far + 2)
    for log in (follower, empty):
        log.close()
    again = open_log(name="follower-0", segment_bytes="200")
    assert offsets_of(again.read(far, 1 << 20))[-1] == far + 14
    assert open_log(name="empty-0").log_end_offset == far + 2


def test_a_damaged_batch_stores_nothing(open_log: OpenLog) -> None:
    follower = open_log(name="follower-0")
    good = batch(2)
    damaged = bytearray(restamped(batch(2), base_offset=2))
    damaged[-3] ^= 0x55
    with pytest.raises(CorruptRecord, match="CRC"):
        follower.append_as_follower(good + bytes(damaged), 0)
    wrong_magic = bytearray(restamped(batch(2), base_offset=2))
    wrong_magic[16] = 1
    with pytest.raises(CorruptRecord, match="magic"):
        follower.append_as_follower(good + bytes(wrong_magic), 0)
    assert follower.log_end_offset == 0 and follower.read(0, 100) == b""


def test_a_trailing_partial_batch_is_ignored(open_log: OpenLog) -> None:
    follower = open_log(name="follower-0")
    first, second = batch(2), restamped(batch(3), base_offset=2)
    for cut in (1, 30, 61, 62, len(second) - 1):
        info = follower.append_as_follower(first + second[:cut], 0)
        assert follower.log_end_offset == 2
        first = b""  # held now
    assert info.last_offset == 1
    follower.append_as_follower(second, 0)
    assert offsets_of(follower.read(0, 1 << 20)) == [0, 1, 2, 3, 4]


def test_followers_store_what_the_leader_checked(open_log: OpenLog) -> None:
    """No timestamp, key or size checks: the leader made them under the same configs."""
    follower = open_log(
        name="follower-0",
        cleanup_policy="compact",
        max_message_bytes="100",
        message_timestamp_type="LogAppendTime",
        message_timestamp_before_max_ms="1",
    )
    unkeyed_and_old = build([b"x" * 200], timestamps=[5])
    follower.append_as_follower(unkeyed_and_old, now_ms=10**12)
    stored = follower.read(0, 1 << 20)
    assert stored == unkeyed_and_old
    assert not parse_header(stored).log_append_time


def test_a_follower_rolls_segments_as_its_leader(open_log: OpenLog) -> None:
    leader = open_log(name="leader-0", segment_ms="1000")
    follower = open_log(name="follower-0", segment_ms="1000")
    for now in (0, 500, 1_200, 1_300, 2_500):
        leader.append(split(batch()), now, leader_epoch=0)
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 20), now)
    assert follower.segment_base_offsets == leader.segment_base_offsets == [0, 2, 4]
    assert stored_batches(follower.read(0, 1 << 20)) == stored_batches(leader.read(0, 1 << 20))


def test_a_follower_restarted_after_a_crash_knows_every_retry_of_its_tail(
    open_log: OpenLog, tmp_path: Path
) -> None:
    """Promoted after a crash, a follower recognises the producer's last five batches,
    those before its producer snapshot and those after it alike."""
    leader = open_log(name="leader-0", **CONFIGS)
    follower = open_log(name="follower-0", **CONFIGS)
    produced = []
    for sequence in range(8):
        raw = batch(2, producer_id=PRODUCER, producer_epoch=0, base_sequence=2 * sequence)
        produced.append((raw, leader.append(split(raw), 0, leader_epoch=0)))
        replicate(leader, follower, max_bytes=300)
        if sequence == 4:
            follower.flush(checkpoint_now=True)  # the snapshot sits inside the last five
    # A crash: the files as they are, never closed.
    shutil.copytree(tmp_path / "follower-0", tmp_path / "crashed-0")
    promoted = open_log(name="crashed-0", **CONFIGS)
    end = promoted.log_end_offset
    assert end == leader.log_end_offset
    snapshot = read_producer_snapshot(tmp_path / "crashed-0" / PRODUCER_SNAPSHOT_FILE)
    assert snapshot is not None and produced[-5][1].first_offset < snapshot[0] < end
    for raw, original in produced[-5:]:
        retry = promoted.append(split(raw), 0, leader_epoch=1)
        assert retry.duplicate
        assert (retry.first_offset, retry.last_offset) == (
            original.first_offset,
            original.last_offset,
        )
    assert promoted.log_end_offset == end
    following = batch(1, producer_id=PRODUCER, producer_epoch=0, base_sequence=16)
    assert promoted.append(split(following), 0, leader_epoch=1).first_offset == end
