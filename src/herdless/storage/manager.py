"""Topics on disk: their partitions' logs, topic ids and explicitly set configs.

    data_dir/
        topics.json        every topic: name, topic id, partition count, explicit configs,
                           and which partitions this node hosts (absent: all of them)
        <topic>-<p>/       one PartitionLog per hosted partition, named as Kafka names them
        .lock              held while a LogManager has the directory open
        clean-shutdown     present only while closed cleanly: the next open checks nothing
        .probe             written and removed again to learn whether a failed directory
                           writes again (probe)

A node hosts the partitions it is a replica of: all of them on a single
broker, a subset in a cluster, where the partition count is the cluster's.

topics.json is the one source of truth for which topics exist and which of
their partitions are hosted here, replaced atomically. Directory changes
happen on the side that is safe if a crash interrupts: partitions are created
before the metadata names them, and deleted after it stops naming them. A
directory the metadata does not name is a leftover, wiped if a later topic or
hosted partition needs its name.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from herdless.clock import monotonic_ms, wall_ms
from herdless.protocol.topic_names import topic_name_problem
from herdless.storage import checkpoint, cleaner
from herdless.storage.config import LogConfig, altered_topic_configs
from herdless.storage.descriptors import DescriptorBudget
from herdless.storage.errors import (
    InvalidConfigError,
    InvalidPartitions,
    InvalidTopicName,
    IoErrorListener,
    LogClosed,
    StorageError,
    StorageIOError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from herdless.storage.log import PartitionLog, log_io_error
from herdless.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger(__name__)

METADATA_FILE = "topics.json"
LOCK_FILE = ".lock"
# Kafka's .kafka_cleanshutdown: written after every log was flushed and closed, removed
# as soon as the logs are open again, so that its presence proves nothing wrote since.
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
PROBE_FILE = ".probe"
_METADATA_VERSION = 1


def validate_topic_name(name: str) -> None:
    """Kafka's rules (Topic.validate): raise InvalidTopicName saying which one is broken."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise InvalidTopicName(problem)


@dataclass(eq=False)
class Topic:
    name: str
    topic_id: uuid.UUID
    config: LogConfig
    # As set by CreateTopics/AlterConfigs, rendered canonically; the rest are defaults.
    explicit_configs: dict[str, str]
    # The topic's size as the cluster knows it; partitions 0..partition_count-1 exist.
    partition_count: int
    # The partitions hosted on this node, by index: all of them on a single broker.
    partitions: dict[int, PartitionLog] = field(default_factory=dict)

    @property
    def hosts_all(self) -> bool:
        return len(self.partitions) == self.partition_count


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
        high_watermark_follows_log_end: bool = True,
        on_io_error: IoErrorListener = log_io_error,
        open_files: int | None = None,
        clock: Callable[[], int] = wall_ms,
        monotonic_clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        """`high_watermark_follows_log_end` off: every log's high watermark is the
        owner's to set (PartitionLog.set_high_watermark), as replication needs.
        `on_io_error` hears of disk operations that failed with no request to tell:
        checkpoints, retention, cleaning. `open_files` bounds the descriptors all
        segments hold at once (descriptors.py); None leaves every segment open.
        `clock` (the wall's) and `monotonic_clock` are the owner's, which storage reads
        where it is not told the time: the broker passes its own, a test may pass
        clocks it moves by hand."""
        self.data_dir = Path(data_dir)
        self.on_io_error = on_io_error
        self._clock = clock
        self._monotonic_clock = monotonic_clock
        self.budget = None if open_files is None else DescriptorBudget(open_files)
        # The broker's topic defaults; a topic's explicit configs apply over them.
        self.default_config = default_config if default_config is not None else LogConfig()
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._high_watermark_follows_log_end = high_watermark_follows_log_end
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._lock_fd: int | None = None
        self._clean_shutdown = False

    # -- lifecycle ----------------------------------------------------------------

    def open(self, now_ms: int) -> None:
        """Lock the data directory and open every topic's partitions."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_directory()
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        self._clean_shutdown = marker.exists()
        try:
            for entry in self._read_metadata():
                name = entry["name"]
                explicit = dict(entry["configs"])
                config = LogConfig.from_topic_configs(explicit, self.default_config)
                count = int(entry["partitions"])
                topic = Topic(name, uuid.UUID(entry["topic_id"]), config, explicit, count)
                self._add(topic)
                for partition in entry.get("hosted", range(count)):
                    topic.partitions[partition] = self._open_partition(topic, partition, now_ms)
        except BaseException:
            self.close(clean=False)
            raise
        finally:
            self._clean_shutdown = False
        if marker.exists():
            marker.unlink()
            checkpoint.fsync_dir(self.data_dir)
        self._report_leftovers()

    def close(self, *, clean: bool = True) -> None:
        """Flush and close every log, then release the directory.

        If every log closed (and `clean`), the directory is marked as cleanly
        shut down, so that the next open skips recovery.
        """
        failed = not clean or self._lock_fd is None
        for partition_log in list(self.logs()):
            # One closed after an I/O error may need recovery: it was not flushed here.
            failed = failed or partition_log.closed
            try:
                partition_log.close()
            except StorageIOError as exc:
                failed = True
                log.warning("closing %s failed: %s", partition_log.name, exc)
            except Exception:
                failed = True
                log.exception("closing %s failed", partition_log.name)
        if not failed:
            try:
                checkpoint.atomic_write(self.data_dir / CLEAN_SHUTDOWN_FILE, b"")
            except OSError as exc:
                log.warning("cannot mark %s as cleanly shut down: %s", self.data_dir, exc)
        self._topics.clear()
        self._by_id.clear()
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            os.close(fd)

    # -- a failed directory ---------------------------------------------------------

    def close_handlers(self) -> None:
        """The data directory failed (a full disk, a failing one): close every log without
        writing to it, as Kafka's LogManager.handleLogDirFailure does, so that nothing is
        written there until reopen(). The topics stay known, their logs closed."""
        for partition_log in list(self.logs()):
            partition_log.close_handlers()

    def probe(self, size: int) -> None:
        """Write `size` bytes to a file of the data directory, sync them and remove the
        file again; StorageIOError if the directory cannot take them (still full, or
        failing). Blocks: call it from a worker thread."""
        path = self.data_dir / PROBE_FILE
        block = bytes(min(size, 1 << 16))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                written = 0
                while written < size:
                    written += os.write(fd, block[: size - written])
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StorageIOError(f"cannot write {size} bytes in {self.data_dir}: {exc}") from exc
        finally:
            with contextlib.suppress(OSError):
                path.unlink()

    def reopen(self, now_ms: int) -> list[PartitionLog]:
        """Open every hosted partition's log again from its files, each recovered as after
        a crash (what was not known synced is checked batch by batch and cut at the first
        torn batch): for a data directory that failed, was closed by close_handlers(), and
        writes again. Returns the logs that replace the closed ones.

        All or nothing: if one cannot be opened (StorageError, or OSError from a directory
        that is failing still), those opened are closed again and the closed ones stay.
        Blocks (it waits for flushes and cleanings of the closed logs to end, and reads
        the logs' tails): call it from a worker thread, while the topics do not change.
        """
        hosted = [
            (topic, index, partition_log)
            for topic in list(self._topics.values())
            for index, partition_log in list(topic.partitions.items())
        ]
        opened: list[PartitionLog] = []
        try:
            for topic, index, closed in hosted:
                closed.wait_idle()
                opened.append(self._open_partition(topic, index, now_ms))
        except BaseException:
            for partition_log in opened:
                partition_log.close_handlers()
            raise
        for (topic, index, _), partition_log in zip(hosted, opened, strict=True):
            topic.partitions[index] = partition_log
        return opened

    # -- lookups ----------------------------------------------------------------

    @property
    def topics(self) -> Mapping[str, Topic]:
        return MappingProxyType(self._topics)

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of a partition hosted here; None for one of another node, or unknown."""
        found = self._topics.get(topic)
        return None if found is None else found.partitions.get(partition)

    def logs(self) -> Iterator[PartitionLog]:
        for topic in list(self._topics.values()):
            yield from list(topic.partitions.values())

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
        topic_id: uuid.UUID | None = None,
        hosted: Iterable[int] | None = None,
        now_ms: int | None = None,
    ) -> Topic:
        """Create a topic of `num_partitions` partitions, hosting those in `hosted` (None: all).

        A cluster passes the topic id it decided on; otherwise a new one is drawn.
        """
        config = self.check_new_topic(name, num_partitions, configs or {})
        indices = _hosted_indices(name, range(num_partitions), hosted)
        if topic_id is None:
            topic_id = new_topic_id()
            while topic_id in self._by_id:
                topic_id = new_topic_id()
        elif topic_id in self._by_id:
            raise TopicAlreadyExists(
                f"topic id {topic_id} is already that of topic {self._by_id[topic_id].name!r}"
            )
        topic = Topic(name, topic_id, config, config.explicit_topic_configs(), num_partitions)
        self._add(topic)
        try:
            self._host(topic, indices, now_ms)
        except BaseException:
            self._forget(topic)
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
        for partition_log in topic.partitions.values():
            partition_log.delete()

    def create_partitions(
        self,
        name: str,
        new_total: int,
        *,
        hosted: Iterable[int] | None = None,
        now_ms: int | None = None,
    ) -> Topic:
        """Raise the partition count to `new_total`, hosting the new partitions in `hosted`.

        None hosts all the new ones, as a single broker does; a cluster names the
        ones this node is a replica of, possibly none.
        """
        topic = self._require(name)
        current = topic.partition_count
        if new_total <= current:
            raise InvalidPartitions(
                f"topic {name!r} has {current} partitions; the new count {new_total} must be larger"
            )
        indices = _hosted_indices(name, range(current, new_total), hosted)
        topic.partition_count = new_total
        try:
            self._host(topic, indices, now_ms)
        except BaseException:
            topic.partition_count = current
            raise
        return topic

    def host_partitions(
        self, name: str, indices: Iterable[int], *, now_ms: int | None = None
    ) -> list[PartitionLog]:
        """Open logs for partitions of a known topic that this node now hosts; returns them.

        A partition hosted already keeps its log; a new one starts empty, any
        leftover directory of that name wiped first.
        """
        topic = self._require(name)
        wanted = _hosted_indices(name, range(topic.partition_count), indices)
        self._host(topic, [i for i in wanted if i not in topic.partitions], now_ms)
        return [topic.partitions[i] for i in wanted]

    def drop_partition(self, name: str, index: int) -> None:
        """Stop hosting one partition: close its log and delete its directory."""
        topic = self._require(name)
        partition_log = topic.partitions.pop(index, None)
        if partition_log is None:
            raise UnknownTopicOrPartition(f"partition {index} of {name!r} is not hosted here")
        try:
            self._save()
        except BaseException:
            topic.partitions[index] = partition_log
            _sort_partitions(topic)
            raise
        partition_log.delete()

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
        explicit = altered_topic_configs(topic.explicit_configs, configs, replace=replace)
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
        for partition_log in topic.partitions.values():
            partition_log.config = config
        return config

    def set_default_config(self, default_config: LogConfig) -> None:
        """New broker-wide topic defaults (dynamic broker configs): from now on every
        topic's config is its own overrides over these. A topic whose overrides do not
        go with them (min.compaction.lag.ms over a lowered max) keeps its config, logged."""
        self.default_config = default_config
        for topic in self._topics.values():
            try:
                config = LogConfig.from_topic_configs(topic.explicit_configs, default_config)
            except InvalidConfigError as exc:
                log.error("topic %s keeps its configs under the new defaults: %s", topic.name, exc)
                continue
            topic.config = config
            for partition_log in topic.partitions.values():
                partition_log.config = config

    def set_producer_id_expiration_ms(self, expiration_ms: int) -> None:
        """A new producer.id.expiration.ms (a dynamic broker config), for every log."""
        self._producer_id_expiration_ms = expiration_ms
        for partition_log in self.logs():
            partition_log.set_producer_id_expiration_ms(expiration_ms)

    # -- maintenance ----------------------------------------------------------------

    def apply_retention(self, now_ms: int) -> int:
        """Apply retention to every partition; returns the number of segments deleted."""
        deleted = 0
        for partition_log in list(self.logs()):
            try:
                deleted += partition_log.apply_retention(now_ms)
            except StorageIOError as exc:
                self.on_io_error("retention", partition_log.name, exc)
            except Exception:
                # One failing disk operation must not stop retention of the other partitions.
                log.exception("retention of %s failed", partition_log.name)
        return deleted

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget idle producers in every partition (producer.id.expiration.ms); returns
        how many were forgotten."""
        return sum(partition_log.remove_expired_producers(now_ms) for partition_log in self.logs())

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
            except (StorageIOError, OSError) as exc:
                self.on_io_error("cleaning", partition_log.name, _as_storage_error(exc))
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

    def _host(self, topic: Topic, indices: list[int], now_ms: int | None) -> None:
        """Create fresh logs for `indices`, then save the metadata that names them."""
        now_ms = self._clock() if now_ms is None else now_ms
        added: list[int] = []
        try:
            for partition in indices:
                try:
                    partition_log = self._open_partition(topic, partition, now_ms, fresh=True)
                except OSError as exc:
                    # Out of space or descriptors: the request is answered, the broker goes on.
                    raise StorageIOError(f"partition {partition}: {exc}") from exc
                topic.partitions[partition] = partition_log
                added.append(partition)
            _sort_partitions(topic)
            self._save()
        except BaseException:
            for partition in added:
                topic.partitions.pop(partition).delete()
            raise

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
        try:
            partition_log = PartitionLog.open(
                directory,
                topic.name,
                partition,
                topic.config,
                now_ms,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
                high_watermark_follows_log_end=self._high_watermark_follows_log_end,
                clean_shutdown=self._clean_shutdown and not fresh,
                budget=self.budget,
                monotonic_clock=self._monotonic_clock,
            )
        except BaseException:
            if fresh:
                # Half made (a full disk): nothing in it yet, and nothing names it.
                shutil.rmtree(directory, ignore_errors=True)
            raise
        partition_log.on_io_error = self.on_io_error
        return partition_log

    def _lock_directory(self) -> None:
        if self._lock_fd is None:
            self._lock_fd = lock_data_dir(self.data_dir)

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
                count = int(entry["partitions"])
                uuid.UUID(entry["topic_id"])
                dict(entry["configs"])
                if "hosted" in entry:
                    entry["hosted"] = _hosted_indices(entry["name"], range(count), entry["hosted"])
        except (KeyError, TypeError, ValueError, StorageError) as exc:
            raise StorageError(f"{path} is malformed: {exc}") from exc
        return topics

    def _save(self) -> None:
        document = {
            "version": _METADATA_VERSION,
            "topics": [
                _metadata_entry(t) for t in sorted(self._topics.values(), key=lambda t: t.name)
            ],
        }
        data = json.dumps(document, indent=1, sort_keys=True).encode() + b"\n"
        try:
            checkpoint.atomic_write(self.data_dir / METADATA_FILE, data)
        except OSError as exc:
            raise StorageIOError(f"cannot write {self.data_dir / METADATA_FILE}: {exc}") from exc

    def _report_leftovers(self) -> None:
        known = {p.directory.name for p in self.logs()}
        for path in self.data_dir.iterdir():
            name, _, number = path.name.rpartition("-")
            if path.is_dir() and number.isdigit() and name and path.name not in known:
                log.warning("%s belongs to no topic; it is ignored", path)


def _as_storage_error(exc: StorageIOError | OSError) -> StorageIOError:
    if isinstance(exc, StorageIOError):
        return exc
    error = StorageIOError(str(exc))
    error.__cause__ = exc
    return error


def _metadata_entry(topic: Topic) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": topic.name,
        "topic_id": str(topic.topic_id),
        "partitions": topic.partition_count,
        "configs": topic.explicit_configs,
    }
    if not topic.hosts_all:
        # Left out when all are hosted: a single broker's metadata stays as it always was.
        entry["hosted"] = sorted(topic.partitions)
    return entry


def _hosted_indices(name: str, allowed: range, indices: Iterable[int] | None) -> list[int]:
    """`indices` sorted and checked against `allowed`; None means all of `allowed`."""
    if indices is None:
        return list(allowed)
    wanted = sorted(set(indices))
    for index in wanted:
        if type(index) is not int or index not in allowed:
            raise InvalidPartitions(
                f"partition {index!r} of {name!r} is not one of {allowed.start}..{allowed.stop - 1}"
            )
    return wanted


def _sort_partitions(topic: Topic) -> None:
    # In place: holders of the dict see the change.
    ordered = sorted(topic.partitions.items())
    topic.partitions.clear()
    topic.partitions.update(ordered)


def lock_data_dir(data_dir: Path) -> int:
    """Hold the data directory as a broker does while it runs (the lock goes with the
    returned descriptor); StorageError if a broker, or another tool, holds it."""
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StorageError(f"{data_dir} is in use by another broker") from None
    return fd
