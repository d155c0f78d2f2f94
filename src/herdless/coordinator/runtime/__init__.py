"""The coordinator runtime every coordinator shares (Kafka's coordinator-common).

Pure like the shards it hosts: it reaches the log only through a PartitionWriter
(writer.py), and every consequence of an input comes back in an Output (output.py) for
the broker to act on. A coordinator brings a CoordinatorType: its internal topic and
how to build its CoordinatorShard (contract.py).
"""

from herdless.coordinator.runtime.contract import (
    CoordinatorShard,
    CoordinatorType,
    ReadOperation,
    ReplaysRuns,
    ReplaysTransactions,
    WriteOperation,
)
from herdless.coordinator.runtime.output import LoadSummary, Offload, Output, Reload
from herdless.coordinator.runtime.runtime import CoordinatorRuntime, ReplicaRole
from herdless.coordinator.runtime.shard_state import NOT_SERVING, RuntimeConfig, ShardState
from herdless.coordinator.runtime.writer import (
    EndTransaction,
    PartitionWriter,
    RecordRun,
    ReplayChunk,
    ReplayItem,
    TopicPartition,
    TransactionalRun,
    WriteError,
)

__all__ = [
    "NOT_SERVING",
    "CoordinatorRuntime",
    "CoordinatorShard",
    "CoordinatorType",
    "EndTransaction",
    "LoadSummary",
    "Offload",
    "Output",
    "PartitionWriter",
    "ReadOperation",
    "RecordRun",
    "Reload",
    "ReplayChunk",
    "ReplayItem",
    "ReplaysRuns",
    "ReplaysTransactions",
    "ReplicaRole",
    "RuntimeConfig",
    "ShardState",
    "TopicPartition",
    "TransactionalRun",
    "WriteError",
    "WriteOperation",
]
