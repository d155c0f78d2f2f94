from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from herdless.storage import (
    ConfigSource,
    InvalidConfigError,
    InvalidPartitions,
    InvalidTopicName,
    LogClosed,
    LogConfig,
    LogManager,
    PartitionLog,
    StorageError,
    StorageIOError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
    checkpoint,
    validate_topic_name,
)
from tests.storage.batches import batch, offsets_of, split
from tests.storage.disk_faults import containing, no_space

OpenManager = Callable[..., LogManager]


@pytest.fixture
def open_manager(tmp_path: Path) -> Iterator[OpenManager]:
    managers: list[LogManager] = []

    def opener(default: LogConfig | None = None) -> LogManager:
        manager = LogManager(tmp_path / "data", default)
        manager.open(now_ms=0)
        managers.append(manager)
        return manager

    yield opener
    for manager in managers:
        manager.close()


def test_topics_survive_restart_with_ids_configs_and_data(open_manager: OpenManager) -> None:
    manager = open_manager()
    topic = manager.create_topic("orders", 3, {"retention.ms": "1000", "segment.bytes": "100000"})
    assert topic.topic_id.int != 0
    assert [p.name for p in topic.partitions.values()] == ["orders-0", "orders-1", "orders-2"]
    assert (manager.data_dir / "orders-2").is_dir()
    partition = manager.partition("orders", 1)
    assert partition is not None
    partition.append(split(batch(3)), 0)
    manager.close()

    again = open_manager()
    restored = again.topics["orders"]
    assert restored.topic_id == topic.topic_id
    assert again.topic_by_id(topic.topic_id) is restored
    assert restored.explicit_configs == {"retention.ms": "1000", "segment.bytes": "100000"}
    assert restored.config.retention_ms == 1000
    assert restored.config.config_source("retention.ms") == ConfigSource.TOPIC_CONFIG
    assert restored.partition_count == len(restored.partitions) == 3
    partition = again.partition("orders", 1)
    assert partition is not None
    assert offsets_of(partition.read(0, 1 << 20)) == [0, 1, 2]
    assert partition.config is restored.config


def test_lookups_of_what_does_not_exist(open_manager: OpenManager) -> None:
    manager = open_manager()
    manager.create_topic("a", 1)
    assert manager.partition("a", 1) is None
    assert manager.partition("a", -1) is None
    assert manager.partition("b", 0) is None
    assert manager.topic_by_id(uuid.uuid4()) is None
    with pytest.raises(UnknownTopicOrPartition):
        manager.delete_topic("b")


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/", "ünï"])
def test_invalid_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicName):
        validate_topic_name(name)


def test_valid_topic_names() -> None:
    for name in ["a", "a" * 249, "__consumer_offsets", "x.y-z_1"]:
        validate_topic_name(name)


def test_creation_is_refused_cleanly(open_manager: OpenManager) -> None:
    manager = open_manager()
    manager.create_topic("a.b", 1)
    with pytest.raises(TopicAlreadyExists):
        manager.create_topic("a.b", 1)
    with pytest.raises(InvalidTopicName, match="collides"):
        manager.create_topic("a_b", 1)
    with pytest.raises(InvalidPartitions):
        manager.create_topic("c", 0)
    with pytest.raises(InvalidConfigError, match="no.such"):
        manager.create_topic("c", 1, {"no.such": "1"})
    with pytest.raises(InvalidTopicName):
        manager.create_topic("bad name", 1)
    assert list(manager.topics) == ["a.b"]
    assert not (manager.data_dir / "c-0").exists()


def test_delete_topic_and_recreate_it(open_manager: OpenManager) -> None:
    manager = open_manager()
    old = manager.create_topic("t", 2)
    log = manager.partition("t", 0)
    assert log is not None
    log.append(split(batch(5)), 0)
    manager.delete_topic("t")
    assert "t" not in manager.topics and manager.topic_by_id(old.topic_id) is None
    assert not (manager.data_dir / "t-0").exists()
    # A leftover directory, as a crash during deletion leaves, does not leak into a new topic.
    leftover = manager.data_dir / "t-1"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"stale")
    new = manager.create_topic("t", 2)
    assert new.topic_id != old.topic_id
    assert all(p.log_end_offset == 0 for p in new.partitions.values())
    manager.close()
    assert open_manager().topics["t"].topic_id == new.topic_id


def test_create_partitions_only_grows(open_manager: OpenManager) -> None:
    manager = open_manager()
    manager.create_topic("t", 1)
    with pytest.raises(InvalidPartitions):
        manager.create_partitions("t", 1)
    topic = manager.create_partitions("t", 4)
    assert (
        topic.partition_count == len(topic.partitions) == 4
        and manager.partition("t", 3) is not None
    )
    manager.close()
    assert open_manager().topics["t"].partition_count == 4


def test_alter_configs_incrementally_and_wholesale(open_manager: OpenManager) -> None:
    manager = open_manager()
    manager.create_topic("t", 2, {"retention.ms": "1000"})
    config = manager.alter_topic_configs("t", {"segment.bytes": "50000", "retention.ms": None})
    assert config.segment_bytes == 50000 and config.retention_ms == 604800000
    assert manager.topics["t"].explicit_configs == {"segment.bytes": "50000"}
    assert all(p.config is config for p in manager.topics["t"].partitions.values())
    with pytest.raises(InvalidConfigError):
        manager.alter_topic_configs("t", {"segment.bytes": "nope"})
    with pytest.raises(InvalidConfigError):
        manager.alter_topic_configs("t", {"no.such": None})
    assert manager.topics["t"].config is config
    unchanged = manager.alter_topic_configs("t", {"flush.ms": "5"}, validate_only=True)
    assert unchanged.flush_ms == 5 and manager.topics["t"].config is config
    manager.alter_topic_configs("t", {"cleanup.policy": "compact"}, replace=True)
    manager.close()
    assert open_manager().topics["t"].explicit_configs == {"cleanup.policy": "compact"}


def test_topics_follow_changed_broker_defaults(open_manager: OpenManager) -> None:
    manager = open_manager()
    manager.create_topic("t", 1, {"segment.bytes": "50000"})
    manager.close()
    defaults = LogConfig.from_topic_configs({"retention.ms": "42", "segment.bytes": "70000"})
    config = open_manager(defaults).topics["t"].config
    assert (config.retention_ms, config.segment_bytes) == (42, 50000)
    assert config.config_source("retention.ms") == ConfigSource.STATIC_BROKER_CONFIG


def test_retention_runs_over_every_topic(open_manager: OpenManager) -> None:
    manager = open_manager()
    for name in ("a", "b"):
        manager.create_topic(name, 2, {"segment.bytes": "14", "retention.ms": "10"})
        for log in manager.topics[name].partitions.values():
            log.append(split(batch()), 0)
            log.append(split(batch()), 0)
    assert manager.apply_retention(now_ms=10**9) == 8
    assert all(log.log_start_offset == 2 for log in manager.logs())


def test_one_manager_per_directory(open_manager: OpenManager, tmp_path: Path) -> None:
    open_manager()
    with pytest.raises(StorageError, match="in use"):
        LogManager(tmp_path / "data").open(now_ms=0)


def test_unreadable_metadata_refuses_to_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "topics.json").write_text("{not json")
    with pytest.raises(StorageError, match="topics.json"):
        LogManager(data).open(now_ms=0)
    (data / "topics.json").write_text(json.dumps({"version": 1, "topics": [{"name": "x"}]}))
    with pytest.raises(StorageError, match="malformed"):
        LogManager(data).open(now_ms=0)


def test_partial_hosting_survives_restart(open_manager: OpenManager) -> None:
    manager = open_manager()
    cluster_id = uuid.uuid4()
    topic = manager.create_topic("t", 4, topic_id=cluster_id, hosted=[3, 1])
    assert topic.topic_id == cluster_id and topic.partition_count == 4
    assert list(topic.partitions) == [1, 3]
    assert manager.partition("t", 0) is None and manager.partition("t", 1) is not None
    assert sorted(p.name for p in manager.logs()) == ["t-1", "t-3"]
    assert not (manager.data_dir / "t-0").exists()
    manager.close()
    again = open_manager()
    restored = again.topics["t"]
    assert (restored.topic_id, restored.partition_count) == (cluster_id, 4)
    assert list(restored.partitions) == [1, 3]


def test_host_and_drop_partitions(open_manager: OpenManager) -> None:
    manager = open_manager()
    manager.create_topic("t", 3, hosted=[])
    assert manager.topics["t"].partitions == {}
    # A directory left by an earlier replica of this partition is not taken for its log.
    stale = manager.data_dir / "t-2"
    stale.mkdir()
    (stale / "00000000000000000000.log").write_bytes(b"stale")
    logs = manager.host_partitions("t", [2, 0])
    assert [p.partition for p in logs] == [0, 2]
    assert all(p.log_end_offset == 0 for p in logs)
    logs[1].append(split(batch(2)), 0)
    assert manager.host_partitions("t", [2])[0] is logs[1]
    with pytest.raises(InvalidPartitions):
        manager.host_partitions("t", [3])
    manager.drop_partition("t", 0)
    assert not (manager.data_dir / "t-0").exists()
    with pytest.raises(UnknownTopicOrPartition):
        manager.drop_partition("t", 0)
    manager.close()
    again = open_manager()
    assert list(again.topics["t"].partitions) == [2]
    assert again.topics["t"].partitions[2].log_end_offset == 2


def test_create_partitions_without_hosting_them(open_manager: OpenManager) -> None:
    manager = open_manager()
    manager.create_topic("t", 2)
    topic = manager.create_partitions("t", 5, hosted=[4])
    assert topic.partition_count == 5 and list(topic.partitions) == [0, 1, 4]
    assert not (manager.data_dir / "t-2").exists()
    with pytest.raises(InvalidPartitions):
        manager.create_partitions("t", 6, hosted=[1])
    assert manager.topics["t"].partition_count == 5
    manager.close()
    again = open_manager().topics["t"]
    assert (again.partition_count, list(again.partitions)) == (5, [0, 1, 4])


def test_a_topic_id_in_use_is_refused(open_manager: OpenManager) -> None:
    manager = open_manager()
    taken = manager.create_topic("a", 1).topic_id
    with pytest.raises(TopicAlreadyExists, match="topic id"):
        manager.create_topic("b", 1, topic_id=taken)
    assert "b" not in manager.topics and not (manager.data_dir / "b-0").exists()


def test_metadata_without_hosted_partitions_means_all(tmp_path: Path) -> None:
    """A data directory written before partial hosting opens unchanged, and stays so."""
    data = tmp_path / "data"
    data.mkdir()
    topic_id = uuid.uuid4()
    entry = {"name": "old", "topic_id": str(topic_id), "partitions": 2, "configs": {}}
    (data / "topics.json").write_text(json.dumps({"version": 1, "topics": [entry]}))
    written = PartitionLog.open(data / "old-1", "old", 1, LogConfig(), now_ms=0)
    written.append(split(batch(3)), 0)
    written.close()
    manager = LogManager(data)
    manager.open(now_ms=0)
    try:
        topic = manager.topics["old"]
        assert (topic.topic_id, topic.partition_count, list(topic.partitions)) == (
            topic_id,
            2,
            [0, 1],
        )
        assert topic.partitions[1].log_end_offset == 3
        manager.alter_topic_configs("old", {"retention.ms": "2000"})
        saved = json.loads((data / "topics.json").read_text())["topics"][0]
        assert set(saved) == set(entry)
    finally:
        manager.close()


def test_hosting_changes_a_failed_metadata_write_leaves_as_they_were(
    open_manager: OpenManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = open_manager()
    manager.create_topic("t", 3, hosted=[0])
    log = manager.partition("t", 0)
    assert log is not None
    log.append(split(batch(2)), 0)

    def failing(path: Path, data: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint, "atomic_write", failing)
    # KAFKA_STORAGE_ERROR to the request that asked.
    with pytest.raises(StorageIOError, match="disk full"):
        manager.host_partitions("t", [1])
    with pytest.raises(StorageIOError):
        manager.create_partitions("t", 5)
    with pytest.raises(StorageIOError):
        manager.drop_partition("t", 0)
    topic = manager.topics["t"]
    assert (topic.partition_count, list(topic.partitions)) == (3, [0])
    assert not (manager.data_dir / "t-1").exists() and not (manager.data_dir / "t-3").exists()
    assert topic.partitions[0] is log and log.read(0, 1 << 20)
    monkeypatch.undo()
    manager.close()
    again = open_manager().topics["t"]
    assert (again.partition_count, list(again.partitions)) == (3, [0])
    assert again.partitions[0].log_end_offset == 2


def test_malformed_hosted_partitions_refuse_to_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    entry = {"name": "t", "topic_id": str(uuid.uuid4()), "partitions": 2, "configs": {}}
    for hosted in ([2], ["0"], 1):
        document = {"version": 1, "topics": [{**entry, "hosted": hosted}]}
        (data / "topics.json").write_text(json.dumps(document))
        with pytest.raises(StorageError, match="malformed"):
            LogManager(data).open(now_ms=0)


# -- a data directory that failed ----------------------------------------------------------


def test_a_failed_directory_is_closed_without_writing_and_reopened_as_after_a_crash(
    open_manager: OpenManager,
) -> None:
    manager = open_manager()
    manager.create_topic("orders", 2, {"flush.messages": "1"})
    first = manager.partition("orders", 0)
    assert first is not None
    first.append(split(batch(3)), 0)
    assert first.flush_due(0)
    manager.close_handlers()
    assert all(partition_log.closed for partition_log in manager.logs())
    # Nothing is flushed there any more: the flush schedule leaves it alone.
    assert not first.flush_due(0)
    with pytest.raises(LogClosed):
        first.append(split(batch(1)), 0)
    # A write the failing disk took only in part: reopening cuts it off.
    segment = manager.data_dir / "orders-0" / f"{0:020d}.log"
    with segment.open("ab") as torn:
        torn.write(b"\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x01")
    reopened = manager.reopen(now_ms=0)
    assert len(reopened) == 2 and not any(p.closed for p in reopened)
    again = manager.partition("orders", 0)
    assert again is not None and again is not first and again in reopened
    assert offsets_of(again.read(0, 1 << 20)) == [0, 1, 2]
    assert again.append(split(batch(2)), 0).first_offset == 3
    assert offsets_of(again.read(0, 1 << 20)) == [0, 1, 2, 3, 4]


def test_reopening_is_all_or_nothing(open_manager: OpenManager) -> None:
    manager = open_manager()
    manager.create_topic("orders", 2)
    closed = list(manager.logs())
    manager.close_handlers()
    # A log that cannot be opened as it stands (a directory where a segment should be).
    broken = manager.data_dir / "orders-1" / f"{5:020d}.log"
    broken.mkdir()
    with pytest.raises(StorageError, match="is a directory"):
        manager.reopen(now_ms=0)
    assert list(manager.logs()) == closed
    broken.rmdir()
    reopened = manager.reopen(now_ms=0)
    assert list(manager.logs()) == reopened and not set(reopened) & set(closed)


def test_a_probe_writes_syncs_and_removes_a_file(
    open_manager: OpenManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = open_manager()
    probe = manager.data_dir / ".probe"
    manager.probe(100_000)
    assert not probe.exists()
    with no_space(monkeypatch, containing(".probe")), pytest.raises(StorageIOError) as failed:
        manager.probe(100_000)
    assert failed.value.errno_name == "ENOSPC"
    assert not probe.exists()
