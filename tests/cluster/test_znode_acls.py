"""The ACLs a znode is created with: Kafka's ZkData.defaultAcls."""

from __future__ import annotations

import pytest
from kazoo.security import ACL, Id, Permissions

from herdless.cluster.zookeeper.znode_acls import default_acls

CREATOR_ALL = ACL(Permissions.ALL, Id("auth", ""))
EVERYONE_ALL = ACL(Permissions.ALL, Id("world", "anyone"))
EVERYONE_READS = ACL(Permissions.READ, Id("world", "anyone"))


@pytest.mark.parametrize(
    "path", ["/brokers/ids/1", "/config/topics/orders", "/kafka-acl/Topic/orders", "/cluster/id"]
)
def test_the_creator_may_do_anything_and_everyone_else_read(path: str) -> None:
    assert default_acls(path, secure=True) == [CREATOR_ALL, EVERYONE_READS]


@pytest.mark.parametrize(
    "path",
    ["/config/users", "/config/users/alice", "/config/brokers/1", "/delegation_token/tokens/t"],
)
def test_credentials_are_the_creators_alone(path: str) -> None:
    assert default_acls(path, secure=True) == [CREATOR_ALL]


def test_the_old_consumers_path_and_everything_without_set_acl_stay_open() -> None:
    assert default_acls("/consumers", secure=True) == [EVERYONE_ALL]
    assert default_acls("/config/users/alice", secure=False) == [EVERYONE_ALL]
