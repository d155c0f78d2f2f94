"""The log of one partition (partition_log.py is its face), in Kafka's parts."""

from herdless.storage.log.append import AppendInfo
from herdless.storage.log.cleaning import CleaningView, SealedSegment
from herdless.storage.log.local_log import CLEANER_CHECKPOINT_FILE, log_io_error
from herdless.storage.log.partition_log import PartitionLog

__all__ = [
    "CLEANER_CHECKPOINT_FILE",
    "AppendInfo",
    "CleaningView",
    "PartitionLog",
    "SealedSegment",
    "log_io_error",
]
