"""What the cluster layer refuses, as exceptions carrying the Kafka error code they stand for.

The same shape as storage's errors: each class names its code once, and the message says
what was wrong, for the error_message field of responses.
"""

from __future__ import annotations

from typing import ClassVar

from herdless.protocol.errors import ErrorCode


class ClusterError(Exception):
    error_code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR


class MalformedZNode(ClusterError):
    """A znode's data is not what Kafka's layout says it holds; the message names the path."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"malformed data at {path}: {reason}")
        self.path = path


class ClusterUnavailable(ClusterError):
    """ZooKeeper could not be reached, or did not answer in time."""


class ZooKeeperAuthenticationFailed(ClusterError):
    """ZooKeeper refused this broker's or tool's SASL login: trying again will not help."""


class BrokerIdInUse(ClusterError):
    """Another live broker holds the registration znode of this broker id."""


class TopicExists(ClusterError):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class TopicNameCollision(ClusterError):
    """Names that differ only by '.' versus '_' collide in Kafka's metric names."""

    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class UnknownTopic(ClusterError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class StateVersionConflict(ClusterError):
    """A conditional write lost: the znode changed since the version the writer read.

    Re-read and decide again; never retry the same write blindly.
    """


class ControllerMoved(StateVersionConflict):
    """The controller epoch znode moved on: this writer is no longer the controller."""

    error_code = ErrorCode.NOT_CONTROLLER


class BrokerNotAvailable(ClusterError):
    """A controlled shutdown asked for a broker that is not registered."""

    error_code = ErrorCode.BROKER_NOT_AVAILABLE


class StaleBrokerEpoch(ClusterError):
    """A request from an earlier life of a broker (an older registration)."""

    error_code = ErrorCode.STALE_BROKER_EPOCH


class InvalidReplicationFactor(ClusterError):
    error_code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignment(ClusterError):
    error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidPartitionCount(ClusterError):
    error_code = ErrorCode.INVALID_PARTITIONS


class IncompleteRackInformation(ClusterError):
    """Some brokers have a rack and some do not, and the assignment must be rack-aware.

    Kafka raises a non-API exception here, which clients see as UNKNOWN_SERVER_ERROR.
    """
