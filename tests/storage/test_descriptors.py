"""Segment files are closed when unused and others need the descriptors, and reopened on
their next use: logs host more segments than the budget, and every read, append, flush
and cleaning finds its files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from herdless.storage import LogConfig, LogManager
from herdless.storage.descriptors import DESCRIPTORS_PER_SEGMENT
from tests.storage.batches import batch, offsets_of, split

BUDGET = 10 * DESCRIPTORS_PER_SEGMENT
PARTITIONS = 60


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def manager_at(path: Path, **configs: str) -> LogManager:
    config = LogConfig.from_topic_configs({k.replace("_", "."): v for k, v in configs.items()})
    manager = LogManager(path, config, open_files=BUDGET)
    manager.open(now_ms=0)
    return manager


def test_many_partitions_within_a_few_descriptors(tmp_path: Path) -> None:
    before = open_descriptors()
    manager = manager_at(tmp_path / "data")
    try:
        topic = manager.create_topic("wide", PARTITIONS)
        for _ in range(3):
            for partition_log in topic.partitions.values():
                partition_log.append(split(batch(2)), 0)
                assert open_descriptors() - before <= BUDGET + 2  # the lock, the directory
        for partition_log in topic.partitions.values():
            partition_log.flush(checkpoint_now=True)
            assert offsets_of(partition_log.read(0, 1 << 20)) == list(range(6))
        assert manager.budget is not None and manager.budget.open_segments <= 10
    finally:
        manager.close()
    again = manager_at(tmp_path / "data")
    try:
        for partition_log in again.topics["wide"].partitions.values():
            assert offsets_of(partition_log.read(0, 1 << 20)) == list(range(6))
    finally:
        again.close()


def test_one_log_reads_across_more_segments_than_the_budget(tmp_path: Path) -> None:
    before = open_descriptors()
    manager = manager_at(tmp_path / "data", segment_bytes="100")
    try:
        [log] = manager.create_topic("long", 1).partitions.values()
        for _ in range(40):
            log.append(split(batch(1, size=60)), 0)
        assert len(log.segment_base_offsets) == 40
        position, seen = 0, []
        while position < log.log_end_offset:
            found = offsets_of(log.read(position, 1))
            seen += found
            position = found[-1] + 1
            assert open_descriptors() - before <= BUDGET + 2
        assert seen == list(range(40))
    finally:
        manager.close()


def test_flushes_and_cleanings_in_threads_beside_appends(tmp_path: Path) -> None:
    """Threads close each other's logs' files only when they can take the log's lock."""
    manager = manager_at(
        tmp_path / "data",
        segment_bytes="300",
        cleanup_policy="compact",
        min_cleanable_dirty_ratio="0",
    )
    errors: list[BaseException] = []
    stop = threading.Event()
    try:
        topic = manager.create_topic("busy", 20)
        logs = list(topic.partitions.values())

        def in_thread(job: str) -> None:
            try:
                while not stop.is_set():
                    for partition_log in logs:
                        if job == "flush":
                            partition_log.flush()
                        else:
                            manager.clean(now_ms=0)
            except BaseException as exc:  # noqa: BLE001 - the test reports it
                errors.append(exc)

        threads = [threading.Thread(target=in_thread, args=(job,)) for job in ("flush", "clean")]
        for thread in threads:
            thread.start()
        for n in range(30):
            for partition_log in logs:
                key = b"k%d" % (n % 5)
                partition_log.append(split(batch(1, size=40, key=key)), 0)
                assert partition_log.read(partition_log.log_end_offset - 1, 1)
        stop.set()
        for thread in threads:
            thread.join()
        assert errors == []
        for partition_log in logs:
            # Compaction keeps at least the latest record of each key.
            assert set(range(25, 30)) <= set(offsets_of(partition_log.read(0, 1 << 20)))
    finally:
        stop.set()
        manager.close()
