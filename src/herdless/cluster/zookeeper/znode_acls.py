"""The ZooKeeper ACLs a znode is created with, as Kafka's ZkData.defaultAcls chooses them.

Without `zookeeper.set.acl` every znode is open to everyone (ZooKeeper's
world:anyone:cdrwa). With it, the creator (the SASL identity the broker or tool logged
in as; ZooKeeper's `auth` scheme stands for it) may do anything, and everyone else may
only read, except under the sensitive paths, which hold credentials: nobody else may
even read those. Kafka leaves /consumers open, for the old consumers that wrote there.

Paths are the cluster's, below any chroot: Kafka decides on them the same way.
"""

from __future__ import annotations

from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from herdless.cluster import layout

# Kafka's ZkData.SensitiveRootPaths: SCRAM credentials, brokers' dynamic configs (they
# may hold passwords), delegation tokens. Compared as Kafka does, by string prefix.
SENSITIVE_ROOT_PATHS = (layout.USER_CONFIGS_PATH, "/config/brokers", "/delegation_token/tokens")
# The old consumers' path, which Kafka never closes.
CONSUMERS_PATH = "/consumers"


def is_sensitive(path: str) -> bool:
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


def default_acls(path: str, secure: bool) -> list[ACL]:
    """The ACLs to create `path` with; `secure` is zookeeper.set.acl."""
    if not secure or path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    if is_sensitive(path):
        return list(CREATOR_ALL_ACL)
    return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]
