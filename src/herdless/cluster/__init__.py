"""The cluster's shared state in ZooKeeper, the way Kafka kept it before KRaft.

layout: Kafka's znode paths and JSON formats; assignment: where replicas go; election:
who leads a partition; store: ZooKeeper access through kazoo (its parts in zookeeper/),
with conditional writes and a session lease; membership: a broker's session,
registration, candidacy for controller and watches; controller: the elected controller.
Sits between storage/ and broker/.
"""

from herdless.cluster.assignment import (
    RackAwareMode,
    assign_new_partitions,
    assign_replicas,
    rack_alternated_brokers,
    validate_new_topic_assignment,
)
from herdless.cluster.election import (
    Offline,
    elect_controlled_shutdown_leader,
    elect_offline_leader,
    elect_preferred_leader,
    initial_state,
    remove_replica_from_isr,
)
from herdless.cluster.errors import (
    BrokerIdInUse,
    ClusterError,
    ClusterUnavailable,
    ControllerMoved,
    IncompleteRackInformation,
    InvalidPartitionCount,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    MalformedZNode,
    StateVersionConflict,
    TopicExists,
    TopicNameCollision,
    UnknownTopic,
    ZooKeeperAuthenticationFailed,
)
from herdless.cluster.layout import (
    NO_LEADER,
    BrokerRegistration,
    LeaderRecoveryState,
    PartitionState,
    TopicAssignment,
    Versioned,
)
from herdless.cluster.store import ClusterStore, ControllerElection, SessionState, Watch

__all__ = [
    "NO_LEADER",
    "BrokerIdInUse",
    "BrokerRegistration",
    "ClusterError",
    "ClusterStore",
    "ClusterUnavailable",
    "ControllerElection",
    "ControllerMoved",
    "IncompleteRackInformation",
    "InvalidPartitionCount",
    "InvalidReplicaAssignment",
    "InvalidReplicationFactor",
    "LeaderRecoveryState",
    "MalformedZNode",
    "Offline",
    "PartitionState",
    "RackAwareMode",
    "SessionState",
    "StateVersionConflict",
    "TopicAssignment",
    "TopicExists",
    "TopicNameCollision",
    "UnknownTopic",
    "Versioned",
    "Watch",
    "ZooKeeperAuthenticationFailed",
    "assign_new_partitions",
    "assign_replicas",
    "elect_controlled_shutdown_leader",
    "elect_offline_leader",
    "elect_preferred_leader",
    "initial_state",
    "rack_alternated_brokers",
    "remove_replica_from_isr",
    "validate_new_topic_assignment",
]
