"""The cluster's state in ZooKeeper, in Kafka's layout, through kazoo.

Threads. Every method is synchronous and blocks its caller for at most the request
timeout; call them from worker threads, never from the event loop. Kazoo runs its own
threads: one talks to ZooKeeper, one runs watch and session callbacks in order, and a few
short-lived ones re-read watched znodes after a reconnection. A watch callback therefore
runs on a kazoo thread (its first call runs in the thread that set the watch, before
watch_* returns); hand its value to the event loop, do not do long work in it.

ClusterStore is one session (zookeeper/session.py: requests, the lease) with the methods
of each family of znodes it reads and writes (zookeeper/brokers.py, topics.py,
configs.py, acls.py, log_dir_events.py, delegation_tokens.py), as Kafka's KafkaZkClient
is one client over the znodes ZkData describes. zookeeper/watches.py says what a watch delivers, and
zookeeper/transactions.py how conditional writes fence a deposed controller.
"""

from __future__ import annotations

from herdless.cluster.zookeeper.acls import AclZNodes
from herdless.cluster.zookeeper.brokers import BrokerZNodes, ControllerElection
from herdless.cluster.zookeeper.configs import ConfigZNodes
from herdless.cluster.zookeeper.delegation_tokens import DelegationTokenZNodes
from herdless.cluster.zookeeper.log_dir_events import LogDirEventZNodes
from herdless.cluster.zookeeper.session import SessionState
from herdless.cluster.zookeeper.topics import TopicZNodes
from herdless.cluster.zookeeper.watches import Watch

__all__ = ["ClusterStore", "ControllerElection", "SessionState", "Watch"]


class ClusterStore(
    BrokerZNodes,
    TopicZNodes,
    ConfigZNodes,
    AclZNodes,
    LogDirEventZNodes,
    DelegationTokenZNodes,
):
    """One ZooKeeper session, and the cluster's znodes read and written through it."""
