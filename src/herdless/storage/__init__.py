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
    CorruptRecord,
    InvalidConfigError,
    InvalidPartitions,
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTimestamp,
    InvalidTopicName,
    LogClosed,
    LogFileError,
    OffsetOutOfRange,
    OffsetsOutOfOrder,
    OutOfOrderSequence,
    RecordError,
    RecordsRefused,
    RecordTooLarge,
    StorageError,
    StorageIOError,
    TopicAlreadyExists,
    UnexpectedAppendOffset,
    UnknownTopicOrPartition,
)
from herdless.storage.leader_epochs import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from herdless.storage.log import AppendInfo, PartitionLog
from herdless.storage.manager import LogManager, Topic, validate_topic_name
from herdless.storage.verification_guard import VerificationGuard

__all__ = [
    "LIST_TOPIC_CONFIGS",
    "TOPIC_CONFIG_NAMES",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "ConfigSource",
    "CorruptRecord",
    "EpochEntry",
    "InvalidConfigError",
    "InvalidPartitions",
    "InvalidProducerEpoch",
    "InvalidRecord",
    "InvalidTimestamp",
    "InvalidTopicName",
    "RecordError",
    "RecordsRefused",
    "LeaderEpochCache",
    "LogClosed",
    "LogFileError",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "OffsetsOutOfOrder",
    "OutOfOrderSequence",
    "PartitionLog",
    "RecordTooLarge",
    "StorageError",
    "StorageIOError",
    "Topic",
    "TopicAlreadyExists",
    "UnexpectedAppendOffset",
    "UnknownTopicOrPartition",
    "VerificationGuard",
    "validate_topic_name",
]
