"""Kafka's ACL APIs on a real broker with the ACL authorizer on: confluent-kafka's and
kafka-python's admin clients create, describe and delete ACLs; bad creations fail alone;
a broker without an authorizer answers SECURITY_DISABLED; a caller without ALTER or
DESCRIBE on the cluster is refused; ACLs survive a restart; `herdless acls` manages them.

The brokers name User:ANONYMOUS, who every PLAINTEXT client is, a super user, so that
the tests may manage ACLs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaResourceType
from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import assert_documented, herdless, refused, succeeded, table_rows
from tests.support.wire import Wire

AUTHORIZER = ("--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer")
SUPER_ANONYMOUS = ("--set", "super.users=User:admin;User:ANONYMOUS")
EVERYTHING = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)
TIMEOUT = 15


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("acls") / "data"
    with module_broker(data, *AUTHORIZER, *SUPER_ANONYMOUS) as process:
        yield process


def confluent(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def kafka_python(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)


def binding(
    name: str,
    principal: str = "User:alice",
    operation: AclOperation = AclOperation.READ,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    resource_type: ResourceType = ResourceType.TOPIC,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def on(name: str, pattern: ResourcePatternType = ResourcePatternType.ANY) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.ANY, name, pattern, None, None, AclOperation.ANY, AclPermissionType.ANY
    )


def create(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT).values():
        assert future.result() is None


def described(admin: AdminClient, acl_filter: AclBindingFilter = EVERYTHING) -> set[AclBinding]:
    return set(admin.describe_acls(acl_filter, request_timeout=TIMEOUT).result())


def deleted(admin: AdminClient, filters: list[AclBindingFilter]) -> list[set[AclBinding]]:
    futures = admin.delete_acls(filters, request_timeout=TIMEOUT)
    return [set(futures[f].result()) for f in filters]


def error_of(future: Any) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result()
    return raised.value.args[0].code()


def test_confluent_kafka_creates_describes_and_deletes_acls(secured: BrokerProcess) -> None:
    admin = confluent(secured)
    read = binding("cf-orders")
    deny = binding(
        "cf-orders", "User:bob", AclOperation.WRITE, AclPermissionType.DENY, host="10.0.0.9"
    )
    prefixed = binding("cf-team-", operation=AclOperation.ALL, pattern=ResourcePatternType.PREFIXED)
    group = binding("cf-billing", resource_type=ResourceType.GROUP)
    create(admin, [read, deny, prefixed, group])
    create(admin, [read])  # again: no change, no error
    assert described(admin, on("cf-orders")) == {read, deny}
    assert described(admin, on("cf-team-", ResourcePatternType.PREFIXED)) == {prefixed}
    # MATCH: every ACL that applies to the topic cf-team-x.
    match = AclBindingFilter(
        ResourceType.TOPIC,
        "cf-team-x",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert described(admin, match) == {prefixed}
    by_bob = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:bob",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert described(admin, by_bob) == {deny}
    assert {read, deny, prefixed, group} <= described(admin)

    assert deleted(admin, [by_bob, on("cf-orders")]) == [{deny}, {read}]
    assert deleted(admin, [on("cf-team-"), on("cf-billing")]) == [{prefixed}, {group}]
    assert deleted(admin, [on("cf-orders")]) == [set()]
    assert not described(admin, on("cf-orders")) | described(admin, on("cf-team-"))


def test_kafka_python_creates_describes_and_deletes_acls(secured: BrokerProcess) -> None:
    admin = kafka_python(secured)
    try:
        pattern = ResourcePattern(KafkaResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
        acl = ACL("User:carol", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)
        cluster = ResourcePattern(KafkaResourceType.CLUSTER, "kafka-cluster")
        idempotent = ACL(
            "User:carol", "*", ACLOperation.IDEMPOTENT_WRITE, ACLPermissionType.ALLOW, cluster
        )
        result = admin.create_acls([acl, idempotent])
        assert result["failed"] == [] and len(result["succeeded"]) == 2
        carol = ACLFilter(
            "User:carol",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KafkaResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        found, _ = admin.describe_acls(carol)
        assert set(found) == {acl, idempotent}
        ((_, removed, error),) = admin.delete_acls([carol])
        assert error.errno == 0 and set(removed) == {acl, idempotent}
        assert admin.describe_acls(carol)[0] == []
    finally:
        admin.close()


def test_bad_creations_fail_alone_with_invalid_request(secured: BrokerProcess) -> None:
    Creation = CreateAclsRequest.AclCreation

    def creation(resource_type: int = 2, name: str = "bad-", pattern: int = 3, **kw: Any) -> Any:
        fields = {"principal": "User:a", "host": "*", "operation": 3, "permission_type": 3}
        fields.update(kw)
        return Creation(
            resource_type=resource_type,
            resource_name=name,
            resource_pattern_type=pattern,
            **fields,
        )

    creations = [
        creation(name="bad-ok"),
        creation(pattern=2),  # MATCH
        creation(pattern=1),  # ANY
        creation(resource_type=0),  # UNKNOWN
        creation(resource_type=1),  # ANY
        creation(operation=1),  # ANY
        creation(permission_type=0),  # UNKNOWN
        creation(resource_type=4, name="my-cluster"),
        creation(name=""),
        creation(principal="alice"),
    ]
    wire = Wire(secured)
    try:
        response = wire.call(CreateAclsRequest[3](creations=creations), CreateAclsResponse[3])
    finally:
        wire.close()
    codes = [r.error_code for r in response.results]  # type: ignore[attr-defined]
    assert codes == [0] + [KafkaError.INVALID_REQUEST] * 9
    messages = [r.error_message for r in response.results]  # type: ignore[attr-defined]
    assert "kafka-cluster" in messages[7]
    assert described(confluent(secured), on("bad-ok")) == {binding("bad-ok", "User:a")}


def test_a_filter_with_unknown_elements_is_an_invalid_request(secured: BrokerProcess) -> None:
    fields = {
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    wire = Wire(secured)
    try:
        describe = DescribeAclsRequest[3](resource_type_filter=0, **fields)
        response = wire.call(describe, DescribeAclsResponse[3])
        assert response.error_code == KafkaError.INVALID_REQUEST  # type: ignore[attr-defined]
        Filter = DeleteAclsRequest.DeleteAclsFilter
        filters = [
            Filter(resource_type_filter=9, **fields),
            Filter(resource_type_filter=1, **fields),
        ]
        answer = wire.call(DeleteAclsRequest[3](filters=filters), DeleteAclsResponse[3])
        codes = [r.error_code for r in answer.filter_results]  # type: ignore[attr-defined]
        assert codes == [KafkaError.INVALID_REQUEST, 0]
    finally:
        wire.close()


def test_version_0_of_each_acl_api(secured: BrokerProcess) -> None:
    """Before KIP-290 there were only literal patterns: v0 creates, describes and deletes
    literal ones."""
    create(confluent(secured), [binding("v0-*", pattern=ResourcePatternType.PREFIXED)])
    wire = Wire(secured)
    try:
        Creation = CreateAclsRequest.AclCreation
        creation = Creation(
            resource_type=2,
            resource_name="v0-topic",
            principal="User:old",
            host="*",
            operation=4,
            permission_type=3,
        )
        created = wire.call(CreateAclsRequest[0](creations=[creation]), CreateAclsResponse[0])
        assert [r.error_code for r in created.results] == [0]  # type: ignore[attr-defined]
        fields = {
            "resource_type_filter": 2,
            "resource_name_filter": None,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        }
        found = wire.call(DescribeAclsRequest[0](**fields), DescribeAclsResponse[0])
        names = {r.resource_name for r in found.resources}  # type: ignore[attr-defined]
        assert "v0-topic" in names and "v0-*" not in names
        Filter = DeleteAclsRequest.DeleteAclsFilter
        answer = wire.call(
            DeleteAclsRequest[0](filters=[Filter(**{**fields, "principal_filter": "User:old"})]),
            DeleteAclsResponse[0],
        )
        (result,) = answer.filter_results  # type: ignore[attr-defined]
        assert [m.resource_name for m in result.matching_acls] == ["v0-topic"]
    finally:
        wire.close()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker: BrokerProcess) -> None:
    admin = confluent(broker)
    (future,) = admin.create_acls([binding("t")], request_timeout=TIMEOUT).values()
    assert error_of(future) == KafkaError.SECURITY_DISABLED
    (future,) = admin.delete_acls([EVERYTHING], request_timeout=TIMEOUT).values()
    assert error_of(future) == KafkaError.SECURITY_DISABLED
    # librdkafka 2.16 drops DescribeAcls' error (its future gives []): kafka-python raises it.
    client = kafka_python(broker)
    try:
        with pytest.raises(SecurityDisabledError):
            client.describe_acls(
                ACLFilter(
                    None,
                    None,
                    ACLOperation.ANY,
                    ACLPermissionType.ANY,
                    ResourcePatternFilter(KafkaResourceType.ANY, None, ACLResourcePatternType.ANY),
                )
            )
    finally:
        client.close()


def test_a_caller_without_alter_or_describe_on_the_cluster_is_refused(tmp_path: Path) -> None:
    """allow.everyone.if.no.acl.found lets anyone manage ACLs while the cluster has none;
    an ACL on the cluster for someone else ends that."""
    args = (*AUTHORIZER, "--set", "allow.everyone.if.no.acl.found=true")
    with module_broker(tmp_path / "data", *args) as broker:
        admin = confluent(broker)
        admin_only = binding(
            "kafka-cluster",
            "User:admin",
            AclOperation.ALL,
            resource_type=ResourceType.BROKER,  # Kafka's CLUSTER
        )
        create(admin, [binding("mine"), admin_only])
        (future,) = admin.create_acls([binding("more")], request_timeout=TIMEOUT).values()
        assert error_of(future) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        (future,) = admin.delete_acls([EVERYTHING], request_timeout=TIMEOUT).values()
        assert error_of(future) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        client = kafka_python(broker)
        try:
            result = client.create_acls(
                [
                    ACL(
                        "User:x",
                        "*",
                        ACLOperation.READ,
                        ACLPermissionType.ALLOW,
                        ResourcePattern(KafkaResourceType.TOPIC, "t"),
                    )
                ]
            )
            assert result["failed"] == [ClusterAuthorizationFailedError]
            with pytest.raises(ClusterAuthorizationFailedError):
                client.describe_acls(
                    ACLFilter(
                        None,
                        None,
                        ACLOperation.ANY,
                        ACLPermissionType.ANY,
                        ResourcePatternFilter(
                            KafkaResourceType.ANY, None, ACLResourcePatternType.ANY
                        ),
                    )
                )
        finally:
            client.close()


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", *AUTHORIZER, *SUPER_ANONYMOUS).start()
    try:
        kept = {
            binding("kept"),
            binding("kept-", pattern=ResourcePatternType.PREFIXED, host="10.1.2.3"),
        }
        create(confluent(broker), sorted(kept, key=str))
        assert broker.stop() == 0
        document = json.loads((tmp_path / "data" / "acls.json").read_text())
        assert {(row["name"], row["patternType"], row["host"]) for row in document["acls"]} == {
            ("kept", "LITERAL", "*"),
            ("kept-", "PREFIXED", "10.1.2.3"),
        }
        broker.start()
        assert described(confluent(broker)) == kept
    finally:
        broker.kill()


def test_an_unreadable_acl_file_stops_the_broker_from_starting(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "acls.json").write_text('{"version": 1, "acls": [{"name": "x"}]}')
    result = herdless("serve", "--port", "0", "--data-dir", str(data), *AUTHORIZER)
    refused(result, "acls.json")


def test_an_unknown_authorizer_is_refused_by_name(tmp_path: Path) -> None:
    result = herdless(
        "serve", "--data-dir", str(tmp_path), "--set", "authorizer.class.name=com.example.Mine"
    )
    refused(result, "authorizer.class.name", code=2)


# -- herdless acls -----------------------------------------------------------------------


def test_the_cli_adds_lists_and_removes_acls(secured: BrokerProcess) -> None:
    def acls(*args: str, input: str | None = None) -> Any:
        return herdless("acls", *args, "-b", secured.bootstrap, input=input)

    out = succeeded(
        acls(
            "add",
            "--allow-principal",
            "User:dora",
            "--operation",
            "Read",
            "--operation",
            "describe",
            "--topic",
            "cli-orders",
        )
    )
    assert table_rows(out) == [
        ["Topic", "cli-orders", "literal", "User:dora", "*", "Read", "Allow"],
        ["Topic", "cli-orders", "literal", "User:dora", "*", "Describe", "Allow"],
    ]
    succeeded(
        acls(
            "add",
            "--producer",
            "--idempotent",
            "--allow-principal",
            "User:dora",
            "--topic",
            "cli-logs-",
            "--resource-pattern-type",
            "prefixed",
        )
    )
    succeeded(
        acls(
            "add",
            "--consumer",
            "--allow-principal",
            "User:eve",
            "--topic",
            "cli-orders",
            "--group",
            "cli-g",
        )
    )
    succeeded(
        acls("add", "--deny-principal", "User:eve", "--deny-host", "10.9.9.9", "--group", "cli-g")
    )
    rows = table_rows(succeeded(acls("list", "--principal", "User:dora")))
    assert sorted(rows) == sorted(
        [
            ["Topic", "cli-orders", "literal", "User:dora", "*", "Read", "Allow"],
            ["Topic", "cli-orders", "literal", "User:dora", "*", "Describe", "Allow"],
            ["Topic", "cli-logs-", "prefixed", "User:dora", "*", "Write", "Allow"],
            ["Topic", "cli-logs-", "prefixed", "User:dora", "*", "Create", "Allow"],
            ["Topic", "cli-logs-", "prefixed", "User:dora", "*", "Describe", "Allow"],
            ["Cluster", "kafka-cluster", "literal", "User:dora", "*", "IdempotentWrite", "Allow"],
        ]
    )
    matching = table_rows(
        succeeded(acls("list", "--topic", "cli-logs-x", "--resource-pattern-type", "match"))
    )
    assert {row[1] for row in matching} == {"cli-logs-"}
    document = json.loads(succeeded(acls("list", "--group", "cli-g", "-o", "json")))
    assert_documented("acls list", document)
    assert document == [
        {
            "resource_type": "Group",
            "name": "cli-g",
            "pattern_type": "literal",
            "principal": "User:eve",
            "host": "10.9.9.9",
            "operation": "All",
            "permission_type": "Deny",
        },
        {
            "resource_type": "Group",
            "name": "cli-g",
            "pattern_type": "literal",
            "principal": "User:eve",
            "host": "*",
            "operation": "Read",
            "permission_type": "Allow",
        },
    ]

    refused(acls("remove", "--group", "cli-g"), "not confirmed")
    removed = table_rows(
        succeeded(
            acls(
                "remove",
                "--topic",
                "cli-orders",
                "--allow-principal",
                "User:dora",
                "--operation",
                "Read",
                input="y\n",
            )
        )
    )
    assert removed == [["Topic", "cli-orders", "literal", "User:dora", "*", "Read", "Allow"]]
    assert len(table_rows(succeeded(acls("remove", "--group", "cli-g", "--force")))) == 2
    assert table_rows(succeeded(acls("list", "--group", "cli-g"))) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["add", "--topic", "t"], "--allow-principal or --deny-principal"),
        (["add", "--allow-principal", "User:a"], "name at least one resource"),
        (["add", "--allow-principal", "alice", "--topic", "t"], "Type:name"),
        (
            ["add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
            "no operation 'Fly'",
        ),
        (
            ["add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"],
            "Group resources take",
        ),
        (
            [
                "add",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
                "--resource-pattern-type",
                "match",
            ],
            "literal or prefixed",
        ),
        (
            [
                "add",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
                "--resource-pattern-type",
                "odd",
            ],
            "literal, prefixed, any or match",
        ),
        (
            [
                "add",
                "--allow-principal",
                "User:a",
                "--cluster",
                "--resource-pattern-type",
                "prefixed",
            ],
            "literal name",
        ),
        (["add", "--consumer", "--allow-principal", "User:a", "--topic", "t"], "--consumer needs"),
        (
            [
                "add",
                "--producer",
                "--operation",
                "Read",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
            ],
            "--producer chooses",
        ),
        (
            ["add", "--idempotent", "--allow-principal", "User:a", "--topic", "t"],
            "--idempotent goes with --producer",
        ),
    ],
)
def test_the_cli_refuses_what_kafka_acls_refuses(args: list[str], words: str) -> None:
    refused(herdless("acls", *args, "-b", "127.0.0.1:1"), words, code=2)


def test_the_cli_says_when_the_broker_has_no_authorizer(broker: BrokerProcess) -> None:
    refused(herdless("acls", "list", "-b", broker.bootstrap), "SECURITY_DISABLED")
