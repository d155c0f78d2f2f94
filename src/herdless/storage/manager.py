"""Topics on disk: their partitions' logs, topic ids and explicitly set configs.

    data_dir/
        topics.json        every topic: name, topic id, partition count, explicit configs
        <topic>-<p>/       one PartitionLog per partition, named as Kafka names them
        .lock              held while a LogManager has the directory open

topics.json is the one source of truth for which topics exist, replaced
atomically. Directory changes happen on the side that is safe if a crash
interrupts: partitions are created before the metadata names them, and
deleted after it stops naming them. A directory the metadata does not name
is a leftover, wiped if a later topic needs its name.
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from herdless.storage import checkpoint, cleaner
from herdless.storage.config import LogConfig
from herdless.storage.errors import (
    InvalidPartitions,
    InvalidTopicName,
    LogClosed,
    StorageError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from herdless.storage.log import PartitionLog
from herdless.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger(__name__)

METADATA_FILE = "topics.json"
LOCK_FILE = ".lock"
_METADATA_VERSION = 1
# Kafka's limit: a partition directory name plus a deletion suffix must fit in 255 bytes.
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's rules (Topic.validate): raise InvalidTopicName saying which one is broken."""
    if not name:
        raise InvalidTopicName("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicName(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicName(
            f"topic name is {len(name)} characters long; the limit is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise InvalidTopicName(
            f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
        )


@dataclass(eq=False)
class Topic:
    name: str
    topic_id: uuid.UUID
    config: LogConfig
    # As set by CreateTopics/AlterConfigs, rendered canonically; the rest are defaults.
    explicit_configs: dict[str, str]
    partitions: list[PartitionLog] = field(default_factory=list)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def new_topic_id() -> uuid.UUID:
    # Kafka's Uuid.randomUuid: never the zero id, and never one whose base64 form
    # starts with '-', which command-line tools would take for an option.
    while True:
        topic_id = uuid.uuid4()
        if base64.urlsafe_b64encode(topic_id.bytes)[:1] != b"-":
            return topic_id


class LogManager:
    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig | None = None,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.data_dir = Path(data_dir)
        # The broker's topic defaults; a topic's explicit configs apply over them.
        self.default_config = default_config if default_config is not None else LogConfig()
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._lock_fd: int | None = None

    # -- lifecycle ----------------------------------------------------------------

    def open(self, now_ms: int) -> None:
        """Lock the data directory and open every topic's partitions."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_directory()
        try:
            for entry in self._read_metadata():
                name = entry["name"]
                explicit = dict(entry["configs"])
                config = LogConfig.from_topic_configs(explicit, self.default_config)
                topic = Topic(name, uuid.UUID(entry["topic_id"]), config, explicit)
                self._add(topic)
                for partition in range(int(entry["partitions"])):
                    topic.partitions.append(self._open_partition(topic, partition, now_ms))
        except BaseException:
            self.close()
            raise
        self._report_leftovers()

    def close(self) -> None:
        """Flush and close every log, then release the directory."""
        for partition_log in list(self.logs()):
            try:
                partition_log.close()
            except Exception:
                log.exception("closing %s failed", partition_log.name)
        self._topics.clear()
        self._by_id.clear()
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            os.close(fd)

    # -- lookups ----------------------------------------------------------------

    @property
    def topics(self) -> Mapping[str, Topic]:
        return MappingProxyType(self._topics)

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        found = self._topics.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            return None
        return found.partitions[partition]

    def logs(self) -> Iterator[PartitionLog]:
        for topic in list(self._topics.values()):
            yield from topic.partitions

    # -- topic administration -----------------------------------------------------

    def check_new_topic(
        self, name: str, num_partitions: int, configs: Mapping[str, str]
    ) -> LogConfig:
        """Everything create_topic checks, without creating (CreateTopics validate_only)."""
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExists(f"topic {name!r} already exists")
        # Kafka refuses names that differ only by '.' versus '_': they collide in metric names.
        collides = name.replace(".", "_")
        for existing in self._topics:
            if existing.replace(".", "_") == collides:
                raise InvalidTopicName(f"topic {name!r} collides with existing topic {existing!r}")
        if num_partitions < 1:
            raise InvalidPartitions(
                f"number of partitions must be at least 1, not {num_partitions}"
            )
        return LogConfig.from_topic_configs(configs, self.default_config)

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        now_ms: int | None = None,
    ) -> Topic:
        config = self.check_new_topic(name, num_partitions, configs or {})
        now_ms = _wall_ms() if now_ms is None else now_ms
        taken = set(self._by_id)
        topic_id = new_topic_id()
        while topic_id in taken:
            topic_id = new_topic_id()
        topic = Topic(name, topic_id, config, config.explicit_topic_configs())
        try:
            for partition in range(num_partitions):
                topic.partitions.append(self._open_partition(topic, partition, now_ms, fresh=True))
            self._add(topic)
            self._save()
        except BaseException:
            self._forget(topic)
            for partition_log in topic.partitions:
                partition_log.delete()
            raise
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self._require(name)
        self._forget(topic)
        try:
            self._save()
        except BaseException:
            self._add(topic)
            raise
        for partition_log in topic.partitions:
            partition_log.delete()

    def create_partitions(self, name: str, new_total: int, *, now_ms: int | None = None) -> Topic:
        topic = self._require(name)
        current = len(topic.partitions)
        if new_total <= current:
            raise InvalidPartitions(
                f"topic {name!r} has {current} partitions; the new count {new_total} must be larger"
            )
        now_ms = _wall_ms() if now_ms is None else now_ms
        added: list[PartitionLog] = []
        try:
            for partition in range(current, new_total):
                added.append(self._open_partition(topic, partition, now_ms, fresh=True))
            topic.partitions.extend(added)
            self._save()
        except BaseException:
            del topic.partitions[current:]
            for partition_log in added:
                partition_log.delete()
            raise
        return topic

    def alter_topic_configs(
        self,
        name: str,
        configs: Mapping[str, str | None],
        *,
        replace: bool = False,
        validate_only: bool = False,
    ) -> LogConfig:
        """Change a topic's explicit configs; returns the resulting config.

        By default incremental (IncrementalAlterConfigs): a value sets a config
        and None reverts it to the default. With `replace`, the given configs
        become the whole set of explicit ones (the legacy AlterConfigs).
        """
        topic = self._require(name)
        explicit = {} if replace else dict(topic.explicit_configs)
        for key, value in configs.items():
            if value is None:
                LogConfig().config_source(key)  # refuses unknown names
                explicit.pop(key, None)
            else:
                explicit[key] = value
        config = LogConfig.from_topic_configs(explicit, self.default_config)
        if validate_only:
            return config
        previous = topic.config, topic.explicit_configs
        topic.config, topic.explicit_configs = config, config.explicit_topic_configs()
        try:
            self._save()
        except BaseException:
            topic.config, topic.explicit_configs = previous
            raise
        for partition_log in topic.partitions:
            partition_log.config = config
        return config

    # -- maintenance ----------------------------------------------------------------

    def apply_retention(self, now_ms: int) -> int:
        """Apply retention to every partition; returns the number of segments deleted."""
        deleted = 0
        for partition_log in list(self.logs()):
            try:
                deleted += partition_log.apply_retention(now_ms)
            except Exception:
                # One failing disk operation must not stop retention of the other partitions.
                log.exception("retention of %s failed", partition_log.name)
        return deleted

    def clean(self, now_ms: int) -> int:
        """Compact every log that asks for it; returns how many were cleaned.

        A log is cleaned when its cleanup.policy has "compact" and the share of
        its cleanable bytes not yet cleaned exceeds min.cleanable.dirty.ratio.
        Meant for a worker thread: each log swaps its cleaned segments in under
        its own lock, so appends, reads and flushes carry on meanwhile. A log
        deleted or closed meanwhile is skipped.
        """
        cleaned = 0
        for partition_log in list(self.logs()):
            if not partition_log.config.compacts or partition_log.closed:
                continue
            try:
                if cleaner.needs_cleaning(partition_log, now_ms):
                    stats = cleaner.clean(partition_log, now_ms)
                    cleaned += not stats.aborted
            except LogClosed:
                continue
            except Exception:
                # One unreadable log must not stop the cleaning of the others.
                log.exception("cleaning %s failed", partition_log.name)
        return cleaned

    # -- internals ------------------------------------------------------------------

    def _require(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        return topic

    def _add(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _forget(self, topic: Topic) -> None:
        if self._topics.get(topic.name) is topic:
            del self._topics[topic.name]
        if self._by_id.get(topic.topic_id) is topic:
            del self._by_id[topic.topic_id]

    def _partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def _open_partition(
        self, topic: Topic, partition: int, now_ms: int, *, fresh: bool = False
    ) -> PartitionLog:
        directory = self._partition_dir(topic.name, partition)
        if fresh and directory.exists():
            # Named by no topic in the metadata: left by a create or delete a crash cut short.
            log.warning("removing leftover partition directory %s", directory)
            shutil.rmtree(directory)
        return PartitionLog.open(
            directory,
            topic.name,
            partition,
            topic.config,
            now_ms,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
        )

    def _lock_directory(self) -> None:
        if self._lock_fd is not None:
            return
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageError(f"{self.data_dir} is in use by another broker") from None
        self._lock_fd = fd

    def _read_metadata(self) -> list[dict[str, Any]]:
        path = self.data_dir / METADATA_FILE
        (self.data_dir / (METADATA_FILE + checkpoint.TMP_SUFFIX)).unlink(missing_ok=True)
        try:
            document = json.loads(path.read_bytes())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            # Refusing to start beats starting without topics that hold data.
            raise StorageError(f"cannot read {path}: {exc}") from exc
        if document.get("version") != _METADATA_VERSION:
            raise StorageError(f"{path} has unknown version {document.get('version')!r}")
        try:
            topics = list(document["topics"])
            for entry in topics:
                validate_topic_name(entry["name"])
                int(entry["partitions"])
                uuid.UUID(entry["topic_id"])
                dict(entry["configs"])
        except (KeyError, TypeError, ValueError, StorageError) as exc:
            raise StorageError(f"{path} is malformed: {exc}") from exc
        return topics

    def _save(self) -> None:
        document = {
            "version": _METADATA_VERSION,
            "topics": [
                {
                    "name": topic.name,
                    "topic_id": str(topic.topic_id),
                    "partitions": len(topic.partitions),
                    "configs": topic.explicit_configs,
                }
                for topic in sorted(self._topics.values(), key=lambda t: t.name)
            ],
        }
        data = json.dumps(document, indent=1, sort_keys=True).encode() + b"\n"
        checkpoint.atomic_write(self.data_dir / METADATA_FILE, data)

    def _report_leftovers(self) -> None:
        known = {p.directory.name for p in self.logs()}
        for path in self.data_dir.iterdir():
            name, _, number = path.name.rpartition("-")
            if path.is_dir() and number.isdigit() and name and path.name not in known:
                log.warning("%s belongs to no topic; it is ignored", path)
