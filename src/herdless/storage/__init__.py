"""Segmented partition logs on local disk, laid out as Kafka lays them out.

Knows nothing of groups: __consumer_offsets is an ordinary compacted topic here.
"""

from herdless.storage.config import (
    LIST_TOPIC_CONFIGS,
    TOPIC_CONFIG_NAMES,
    ConfigSource,
    LogConfig,
)
from herdless.storage.errors import (
    InvalidConfigError,
    InvalidPartitions,
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTimestamp,
    InvalidTopicName,
    LogClosed,
    OffsetOutOfRange,
    OutOfOrderSequence,
    RecordTooLarge,
    StorageError,
    StorageIOError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from herdless.storage.log import AppendInfo, PartitionLog
from herdless.storage.manager import LogManager, Topic, validate_topic_name

__all__ = [
    "LIST_TOPIC_CONFIGS",
    "TOPIC_CONFIG_NAMES",
    "AppendInfo",
    "ConfigSource",
    "InvalidConfigError",
    "InvalidPartitions",
    "InvalidProducerEpoch",
    "InvalidRecord",
    "InvalidTimestamp",
    "InvalidTopicName",
    "LogClosed",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "PartitionLog",
    "RecordTooLarge",
    "StorageError",
    "StorageIOError",
    "Topic",
    "TopicAlreadyExists",
    "UnknownTopicOrPartition",
    "validate_topic_name",
]
