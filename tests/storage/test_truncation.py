"""A follower cutting its log back to where it agrees with its leader, and what survives a crash."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.protocol.records import BatchHeader
from herdless.storage import EpochEntry, LogConfig, PartitionLog, cleaner
from tests.storage.batches import (
    batch,
    build,
    keyed_records_of,
    offsets_of,
    records_of,
    split,
    stored_batches,
)
from tests.storage.conftest import OpenLog

CONFIG = LogConfig.from_topic_configs({"segment.bytes": "600", "index.interval.bytes": "120"})
# Leader epoch of each batch appended to the pristine log.
EPOCHS = [0, 0, 0, 1, 1, 2, 2, 2, 2, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6]


def open_at(directory: Path, now_ms: int = 0) -> PartitionLog:
    return PartitionLog.open(directory, "t", 0, CONFIG, now_ms)


def expected_epochs(headers: list[BatchHeader]) -> list[EpochEntry]:
    """The cache appending these batches builds: where each higher epoch first appears."""
    entries: list[EpochEntry] = []
    for header in headers:
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not entries or epoch > entries[-1].epoch):
            entries.append(EpochEntry(epoch, header.base_offset))
    return entries


def contents(log: PartitionLog) -> list[tuple[BatchHeader, bytes]]:
    return stored_batches(log.read(log.log_start_offset, 1 << 30))


def assert_consistent(log: PartitionLog) -> None:
    """The epoch cache says what the batches say."""
    assert log.leader_epoch_entries == expected_epochs([h for h, _ in contents(log)])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pristine") / "t-0"
    log = open_at(directory)
    for i, epoch in enumerate(EPOCHS):
        raw = batch(1 + i % 3, size=30 + 7 * (i % 4), first_timestamp=100 * i + 50 * (i % 3))
        log.append(split(raw), 0, leader_epoch=epoch)
    assert len(log.segment_base_offsets) >= 4
    log.close()
    return directory


@pytest.fixture
def copy(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "t-0"
    shutil.copytree(pristine, target)
    return target


def pristine_epochs(directory: Path) -> list[EpochEntry]:
    log = open_at(directory)
    try:
        return log.leader_epoch_entries
    finally:
        log.close()


def cut_points(batches: list[tuple[BatchHeader, bytes]]) -> list[tuple[int, int]]:
    """(offset to truncate to, log end offset expected) at and inside every batch."""
    points = []
    for header, _ in batches:
        points.append((header.base_offset, header.base_offset))
        if header.last_offset > header.base_offset:
            # A batch holding the offset goes whole.
            points.append((header.base_offset + 1, header.base_offset))
    return points


def test_truncate_at_every_batch_boundary_then_reopen(pristine: Path, tmp_path: Path) -> None:
    original = open_at(pristine)
    batches = contents(original)
    bases = original.segment_base_offsets
    timestamps = range(0, 100 * len(EPOCHS), 37)
    original.close()
    for i, (offset, end) in enumerate(cut_points(batches)):
        directory = tmp_path / f"cut-{i}" / "t-0"
        shutil.copytree(pristine, directory)
        log = open_at(directory)
        assert log.truncate_to(offset, now_ms=0)
        kept = [b for b in batches if b[0].base_offset < end]
        assert log.log_end_offset == end
        assert contents(log) == kept
        assert log.segment_base_offsets == [b for b in bases if b <= end]
        assert_consistent(log)
        # Reads and timestamp lookups agree with a log that only ever held what is kept.
        reference = open_at(tmp_path / f"ref-{i}" / "t-0")
        for _, raw in kept:
            reference.append_as_follower(raw, 0)
        for o in range(end):
            assert log.read(o, 1) == reference.read(o, 1)
        found = [log.offset_for_timestamp(t) for t in timestamps]
        assert found == [reference.offset_for_timestamp(t) for t in timestamps]
        assert log.max_timestamp_offset() == reference.max_timestamp_offset()
        reference.close()
        log.close()
        again = open_at(directory)
        assert (again.log_end_offset, contents(again)) == (end, kept)
        assert_consistent(again)
        assert [again.offset_for_timestamp(t) for t in timestamps] == found
        again.append(split(batch(2)), 0, leader_epoch=9)
        assert again.leader_epoch_entries[-1] == EpochEntry(9, end)
        again.close()
        assert offsets_of(open_at(directory).read(end, 1 << 20))[-2:] == [end, end + 1]


def test_truncating_at_or_past_the_end_drops_only_an_unwritten_epoch(copy: Path) -> None:
    """As Kafka: a leader elected here may have assigned its epoch and written nothing."""
    log = open_at(copy)
    end = log.log_end_offset
    log.assign_leader_epoch(8)
    assert log.latest_epoch == 8
    assert not log.truncate_to(end + 5, now_ms=0)
    assert log.latest_epoch == 6 and log.log_end_offset == end
    log.assign_leader_epoch(8)
    log.append(split(batch()), 0, leader_epoch=8)
    assert not log.truncate_to(end + 1, now_ms=0)
    assert log.leader_epoch_entries[-1] == EpochEntry(8, end)
    log.close()


def test_diverging_batches_are_replaced_by_the_new_leaders(open_log: OpenLog) -> None:
    """The truncation a follower does after OffsetForLeaderEpoch, then catching up."""
    old_leader = open_log(name="old-0", segment_bytes="500")
    for i in range(8):
        old_leader.append(split(batch(2, size=40, first_timestamp=i)), 0, leader_epoch=1)
    # The follower got all of epoch 1, the next leader only up to offset 10; that one
    # takes over under epoch 2 and writes on from there.
    follower = open_log(name="follower-0", segment_bytes="500")
    follower.append_as_follower(old_leader.read(0, 1 << 20), 0)
    assert follower.log_end_offset == 16
    new_leader = open_log(name="new-0", segment_bytes="500")
    held = stored_batches(old_leader.read(0, 1 << 20))
    new_leader.append_as_follower(b"".join(raw for h, raw in held if h.base_offset < 10), 0)
    assert new_leader.log_end_offset == 10
    new_leader.assign_leader_epoch(2)
    for i in range(5):
        new_leader.append(split(batch(3, size=25, first_timestamp=100 + i)), 0, leader_epoch=2)
    epoch, end_offset = new_leader.end_offset_for_epoch(follower.latest_epoch or 0)
    assert (epoch, end_offset) == (1, 10)
    assert follower.truncate_to(end_offset, now_ms=0)
    assert follower.log_end_offset == 10
    follower.append_as_follower(new_leader.read(10, 1 << 20), 0)
    assert follower.read(0, 1 << 20) == new_leader.read(0, 1 << 20)
    assert (
        follower.leader_epoch_entries
        == new_leader.leader_epoch_entries
        == [
            EpochEntry(1, 0),
            EpochEntry(2, 10),
        ]
    )
    assert follower.segment_base_offsets == new_leader.segment_base_offsets


def test_truncation_rebuilds_producer_state(open_log: OpenLog) -> None:
    log = open_log()
    for sequence in range(0, 12, 2):
        raw = batch(2, producer_id=5, producer_epoch=0, base_sequence=sequence)
        log.append(split(raw), 0, leader_epoch=0)
    log.truncate_to(7, now_ms=0)
    entry = log.producers.entry(5)
    assert entry is not None and entry.last_sequence == 5 and entry.last_offset == 5
    # The producer's retry of sequence 6, cut away, is written anew; one of 4 is a duplicate.
    assert log.append(
        split(batch(2, producer_id=5, producer_epoch=0, base_sequence=4)), 0
    ).duplicate
    again = log.append(split(batch(2, producer_id=5, producer_epoch=0, base_sequence=6)), 0)
    assert not again.duplicate and again.first_offset == 6


def test_truncation_below_the_log_start(copy: Path) -> None:
    log = open_at(copy)
    first_base = log.segment_base_offsets[1]
    log.delete_records(first_base + 1)
    assert log.segment_base_offsets[0] == first_base
    assert log.truncate_to(first_base + 1, now_ms=0)
    # The batch holding the log start went whole: the log is empty where it ended.
    assert log.log_start_offset == log.log_end_offset <= first_base + 1
    assert log.read(log.log_start_offset, 100) == b""
    log.close()
    again = open_at(copy)
    assert again.log_start_offset == again.log_end_offset
    # Below the first segment, the log restarts where it was asked to.
    assert again.truncate_to(first_base - 3, now_ms=0)
    assert (again.log_start_offset, again.log_end_offset) == (first_base - 3, first_base - 3)
    assert again.segment_base_offsets == [first_base - 3]
    again.close()


@pytest.mark.parametrize("ahead", [True, False])
def test_truncate_fully_and_start_at(copy: Path, ahead: bool) -> None:
    log = open_at(copy)
    offset = log.log_end_offset + 100 if ahead else 3
    log.truncate_fully_and_start_at(offset)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (offset,) * 3
    assert log.segment_base_offsets == [offset]
    assert log.leader_epoch_entries == [] and len(log.producers) == 0
    assert log.append(split(batch()), 0, leader_epoch=7).first_offset == offset
    log.close()
    again = open_at(copy)
    assert (again.log_start_offset, again.log_end_offset) == (offset, offset + 1)
    assert again.leader_epoch_entries == [EpochEntry(7, offset)]
    assert sorted(p.name for p in copy.glob("*.log")) == [f"{offset:020d}.log"]


def test_truncation_lowers_the_cleaner_checkpoint(copy: Path) -> None:
    (copy / cleaner.CLEANER_CHECKPOINT_FILE).write_text("0\n40\n")
    log = open_at(copy)
    log.truncate_to(12, now_ms=0)
    assert (copy / cleaner.CLEANER_CHECKPOINT_FILE).read_text().split() == ["0", "12"]
    log.close()


# -- a crash at every step --------------------------------------------------------------------


class Crash(Exception):
    """Where the process died."""


_HOOKED = ("unlink", "ftruncate", "fsync", "replace", "rename", "write", "pwrite", "pwritev")


def crash_before_call(
    monkeypatch: pytest.MonkeyPatch, step: int, directory: Path, snapshot: Path
) -> None:
    """At the step-th file operation, copy `directory` to `snapshot` as a kill -9 would leave
    it (written data stays in the page cache) and raise Crash."""
    calls = itertools.count()
    copying = False

    def hook(real: Callable[..., object]) -> Callable[..., object]:
        def hooked(*args: object, **kwargs: object) -> object:
            nonlocal copying
            if not copying and next(calls) == step:
                copying = True
                shutil.copytree(directory, snapshot)
                raise Crash
            return real(*args, **kwargs)

        return hooked

    for name in _HOOKED:
        monkeypatch.setattr(os, name, hook(getattr(os, name)))


def crash_everywhere(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str, offset: int
) -> Iterator[Path]:
    """Run the truncation on copies of `pristine`, crashing it at each step in turn;
    yields the directory each crash left."""
    for step in itertools.count():
        work = tmp_path / f"work-{step}" / "t-0"
        snapshot = tmp_path / f"crash-{step}" / "t-0"
        shutil.copytree(pristine, work)
        log = open_at(work)
        with monkeypatch.context() as patched:
            crash_before_call(patched, step, work, snapshot)
            try:
                if operation == "truncate_to":
                    log.truncate_to(offset, now_ms=0)
                else:
                    log.truncate_fully_and_start_at(offset)
            except Crash:
                pass
            else:
                assert step > 3
                return
        with contextlib.suppress(Exception):
            log.close()
        yield snapshot


def test_a_crash_during_truncate_to_leaves_a_prefix(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = open_at(pristine)
    batches = contents(original)
    original.close()
    # Inside the second batch of epoch 5: two segments go, one is cut, epoch 6 goes.
    second = batches[10][0]
    assert second.partition_leader_epoch == 5 and second.last_offset > second.base_offset
    cut, end = second.base_offset + 1, second.base_offset
    kept = [b for b in batches if b[0].base_offset < end]
    assert len(kept) == 10 and pristine_epochs(pristine)[-1].epoch == 6
    new = build([b"new"])
    for snapshot in crash_everywhere(pristine, tmp_path, monkeypatch, "truncate_to", cut):
        log = open_at(snapshot)
        found = contents(log)
        assert found == batches[: len(found)] and len(found) >= len(kept), snapshot
        assert_consistent(log)
        # As a follower does after a restart: truncate again, then take new batches.
        log.truncate_to(cut, now_ms=0)
        log.append(split(new), 0, leader_epoch=9)
        log.close()
        again = open_at(snapshot)
        assert [h.partition_leader_epoch for h, _ in contents(again)][-1] == 9
        assert contents(again)[:-1] == kept
        assert records_of(contents(again)[-1][1])[0][2] == b"new"
        assert_consistent(again)
        again.close()


@pytest.mark.parametrize("where", ["ahead", "below"])
def test_a_crash_during_truncate_fully_leaves_the_log_or_nothing(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    original = open_at(pristine)
    batches = contents(original)
    offset = original.log_end_offset + 50 if where == "ahead" else 2
    original.close()
    for snapshot in crash_everywhere(
        pristine, tmp_path, monkeypatch, "truncate_fully_and_start_at", offset
    ):
        log = open_at(snapshot)
        found = contents(log)
        if found:
            assert found == batches[: len(found)]
            assert_consistent(log)
        else:
            start = log.log_start_offset
            assert log.log_end_offset == start
            if where == "ahead":
                assert start == offset
            # As in Kafka, the cache may keep the epoch the log start falls in.
            assert [e.start_offset for e in log.leader_epoch_entries] in ([], [start])
        log.truncate_fully_and_start_at(offset)
        log.append(split(batch()), 0, leader_epoch=3)
        log.close()
        again = open_at(snapshot)
        assert (again.log_start_offset, again.log_end_offset) == (offset, offset + 1)
        assert again.leader_epoch_entries == [EpochEntry(3, offset)]
        again.close()


# -- threads ------------------------------------------------------------------------------


def test_truncation_beside_flushes_and_cleanings(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="1500", cleanup_policy="compact", min_cleanable_dirty_ratio="0")
    stop = threading.Event()
    errors: list[BaseException] = []
    cleanings: list[cleaner.CleanStats] = []

    def worker(job: Callable[[], object]) -> None:
        while not stop.is_set():
            try:
                job()
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [
        threading.Thread(target=worker, args=(log.flush,)),
        threading.Thread(target=worker, args=(lambda: cleanings.append(cleaner.clean(log, 0)),)),
    ]
    for thread in threads:
        thread.start()
    latest: dict[bytes, int] = {}
    try:
        for i in range(600):
            key = b"k%d" % (i % 7)
            info = log.append(split(batch(2, size=40, key=key)), 0, leader_epoch=i // 50)
            latest[key] = info.last_offset
            if i % 40 == 39:
                log.truncate_to(log.log_end_offset - 30, now_ms=0)
                latest = {k: o for k, o in latest.items() if o < log.log_end_offset}
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors
    assert any(c.segments_written and not c.aborted for c in cleanings)
    end = log.log_end_offset
    assert end == 1200 - 15 * 30

    def check(log: PartitionLog) -> None:
        found = contents(log)
        # Compaction drops whole batches, so the cache may name epochs that no batch
        # starts any more; what remains must lie in the epoch the cache says.
        assert all(
            log.epoch_for_offset(h.base_offset) == h.partition_leader_epoch for h, _ in found
        )
        kept = {key: offset for offset, _, key, _ in keyed_records_of(log.read(0, 1 << 30))}
        assert {key: kept[key] for key in latest} == latest

    check(log)
    log.close()
    again = open_log(segment_bytes="1500", cleanup_policy="compact")
    assert again.log_end_offset == end
    check(again)


# -- the epoch cache keeps step with the batches ------------------------------------------

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 3)),
        st.tuples(st.just("truncate"), st.integers(0, 1000)),
        st.tuples(st.just("reopen"), st.booleans()),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(operations=OPERATIONS)
def test_the_epoch_cache_follows_appends_truncations_and_reopens(
    operations: list[tuple[str, int, int] | tuple[str, int] | tuple[str, bool]],
) -> None:
    config = LogConfig.from_topic_configs({"segment.bytes": "300"})
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = PartitionLog.open(directory, "t", 0, config, 0)
        epoch = 0
        try:
            for operation in operations:
                if operation[0] == "append":
                    _, bump, count = operation
                    epoch += bump
                    log.append(split(batch(count, size=30)), 0, leader_epoch=epoch)
                elif operation[0] == "truncate":
                    log.truncate_to(log.log_end_offset * operation[1] // 1000, now_ms=0)
                else:
                    log.close()
                    if operation[1]:
                        # Without its checkpoint the cache is rebuilt from the batches.
                        (directory / "leader-epoch-checkpoint").unlink(missing_ok=True)
                    log = PartitionLog.open(directory, "t", 0, config, 0)
                assert_consistent(log)
        finally:
            log.close()
