"""What the storage layer refuses, as exceptions the broker maps onto Kafka error codes.

Each class names the Kafka error code it stands for, so the mapping lives in one
place; the message says what was wrong, for the error_message field of responses.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from herdless.protocol.errors import ErrorCode


class StorageError(Exception):
    error_code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR


class StorageIOError(StorageError):
    """A read, write or fsync of log files failed; raised from the OSError that says why."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR

    @property
    def errno_name(self) -> str:
        """The failed call's errno by name (ENOSPC for a full disk), or "unknown"."""
        cause = self.__cause__
        while cause is not None:
            if isinstance(cause, OSError) and cause.errno is not None:
                return errno.errorcode.get(cause.errno, str(cause.errno))
            cause = cause.__cause__
        return "unknown"


# Told of a disk operation that failed where no request is waiting to hear of it
# (a checkpoint, retention, a cleaning): the operation's name, the partition's, the error.
IoErrorListener = Callable[[str, str, StorageIOError], None]


class LogFileError(StorageError):
    """A file of a partition's log that cannot be used as it stands (a directory where a
    segment should be, a dangling link, an unreadable file, a name that is no offset).

    Raised when the log is opened; the message names the file and what is wrong with
    it. Nothing is changed: a log missing a segment must not be served as complete.
    """

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class LogClosed(StorageError):
    """The partition log was closed or deleted while a request still held it."""

    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class OffsetOutOfRange(StorageError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecord(StorageError):
    """A batch replicated from a leader that fails its checks (CRC, header)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class OffsetsOutOfOrder(StorageError):
    """Batches replicated from a leader whose offsets do not increase."""


class UnexpectedAppendOffset(StorageError):
    """A replicated batch that starts below the log end offset but ends at or after it.

    The log already holds its first records, or held them before a truncation
    took the batch away whole; the replica must truncate or restart its log
    (at `first_offset`, if the log is empty) before it can take the batch.
    """

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class RecordTooLarge(StorageError):
    error_code = ErrorCode.MESSAGE_TOO_LARGE


@dataclass(frozen=True, slots=True)
class RecordError:
    """One refused record of a batch (KIP-467): its index in the batch and why."""

    batch_index: int
    message: str


class RecordsRefused(StorageError):
    """A batch refused whole for some of its records, which `record_errors` names."""

    def __init__(self, message: str, record_errors: tuple[RecordError, ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidRecord(RecordsRefused):
    """A record the log refuses, such as one without a key in a compacted topic."""

    error_code = ErrorCode.INVALID_RECORD


class InvalidTimestamp(RecordsRefused):
    """A CreateTime record outside message.timestamp.before/after.max.ms of the broker's clock."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class InvalidProducerEpoch(StorageError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class OutOfOrderSequence(StorageError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidTxnState(StorageError):
    """A producer with a transaction open wrote outside it (Kafka's InvalidTxnStateException)."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFenced(StorageError):
    """A marker from a coordinator older than the last one to write for the producer."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class UnknownTopicOrPartition(StorageError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class TopicAlreadyExists(StorageError):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidTopicName(StorageError):
    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidPartitions(StorageError):
    error_code = ErrorCode.INVALID_PARTITIONS


class InvalidConfigError(StorageError, ValueError):
    error_code = ErrorCode.INVALID_CONFIG


def file_problem(fallback: Path, exc: OSError) -> str:
    """What is wrong with the file an OSError names (`fallback` if it names none), in words."""
    path = Path(exc.filename) if exc.filename is not None else fallback
    if path.is_symlink() and not path.exists():
        return f"{path} is a symbolic link to {os.readlink(path)}, which does not exist"
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a directory, not a file"
    if isinstance(exc, (NotADirectoryError, FileExistsError)) and not path.is_dir():
        return f"{path} is not a directory"
    if isinstance(exc, PermissionError):
        return f"{path} cannot be read or written: {exc.strerror}"
    return f"{path}: {exc.strerror or exc}"
