"""`herdless acls add|list|remove`: Kafka's ACLs, with kafka-acls.sh's options, through
DescribeAcls, CreateAcls and DeleteAcls, so it works against any Kafka-compatible
broker with an authorizer.

What the options mean is kafka-acls.sh's: each --allow-principal (from each --allow-host,
default every host) and each --deny-principal (from each --deny-host) gets each
--operation (default All) on each resource named (--topic, --group, --cluster,
--transactional-id, --delegation-token, --user-principal) under
--resource-pattern-type; --producer and --consumer stand for the operations a producer
or a consumer needs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from herdless.admin.client import error_text
from herdless.cli.client import connect
from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import OutputOption, Table, View, show
from herdless.security.acls import (
    ANY_BINDING,
    ANY_ENTRY,
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from herdless.security.principal import parse_principal

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

acls_app = command_group("Add, list and remove Kafka's ACLs (as kafka-acls.sh does).")

_PRODUCER_TOPIC_OPERATIONS = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
_PRODUCER_TRANSACTIONAL_OPERATIONS = (AclOperation.WRITE, AclOperation.DESCRIBE)
_CONSUMER_TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE)
_CONSUMER_GROUP_OPERATIONS = (AclOperation.READ,)


@dataclass
class AclOptions:
    """The command line, as kafka-acls.sh reads it."""

    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    cluster: bool = False
    transactional_ids: list[str] = field(default_factory=list)
    # Delegation tokens by id, and User resources (whose tokens: CreateTokens, DescribeTokens).
    delegation_tokens: list[str] = field(default_factory=list)
    user_principals: list[str] = field(default_factory=list)
    pattern_type: PatternType = PatternType.LITERAL
    allow_principals: list[str] = field(default_factory=list)
    deny_principals: list[str] = field(default_factory=list)
    allow_hosts: list[str] = field(default_factory=list)
    deny_hosts: list[str] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    producer: bool = False
    consumer: bool = False
    idempotent: bool = False


def resource_filters(options: AclOptions, required: bool = True) -> list[ResourcePatternFilter]:
    """The resources named, under the pattern type; ValueError if none is and one must be."""
    pattern_type = options.pattern_type
    named = [(ResourceType.TOPIC, t) for t in options.topics]
    named += [(ResourceType.GROUP, g) for g in options.groups]
    named += [(ResourceType.TRANSACTIONAL_ID, t) for t in options.transactional_ids]
    named += [(ResourceType.DELEGATION_TOKEN, t) for t in options.delegation_tokens]
    named += [(ResourceType.USER, u) for u in options.user_principals]
    for resource_type, name in named:
        if not name.strip():
            raise ValueError(f"an empty {resource_type.kafka_name} name names no resource")
    filters = [ResourcePatternFilter(t, n.strip(), pattern_type) for t, n in named]
    if options.cluster and pattern_type is PatternType.PREFIXED:
        raise ValueError(
            "the cluster has one literal name: --cluster takes no --resource-pattern-type prefixed"
        )
    if options.cluster or options.idempotent:
        # --idempotent with prefixed topics still means the cluster's one literal name
        # (kafka-acls.sh drops it there, silently).
        cluster_pattern = PatternType.LITERAL if pattern_type.specific else pattern_type
        filters.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, cluster_pattern))
    filters = list(dict.fromkeys(filters))
    if required and not filters:
        raise ValueError(
            "name at least one resource: --topic T, --group G, --cluster, --transactional-id T,"
            " --delegation-token ID or --user-principal User:NAME"
        )
    return filters


def entries_by_resource(
    options: AclOptions,
) -> dict[ResourcePatternFilter, set[AccessControlEntry]]:
    """The ACLs the options describe, per resource (kafka-acls.sh's getResourceFilterToAcls)."""
    _check_roles(options)
    filters = resource_filters(options)
    wanted: dict[ResourcePatternFilter, set[AccessControlEntry]] = {}
    if not options.producer and not options.consumer:
        operations = tuple(_operation(o) for o in options.operations) or (AclOperation.ALL,)
        entries = _entries(options, operations)
        wanted = {f: set(entries) for f in filters}
    if options.producer:
        for f in filters:
            if f.resource_type is ResourceType.TOPIC:
                wanted.setdefault(f, set()).update(_entries(options, _PRODUCER_TOPIC_OPERATIONS))
            elif f.resource_type is ResourceType.TRANSACTIONAL_ID:
                wanted.setdefault(f, set()).update(
                    _entries(options, _PRODUCER_TRANSACTIONAL_OPERATIONS)
                )
            elif f.resource_type is ResourceType.CLUSTER and options.idempotent:
                wanted.setdefault(f, set()).update(
                    _entries(options, (AclOperation.IDEMPOTENT_WRITE,))
                )
    if options.consumer:
        for f in filters:
            if f.resource_type is ResourceType.TOPIC:
                wanted.setdefault(f, set()).update(_entries(options, _CONSUMER_TOPIC_OPERATIONS))
            elif f.resource_type is ResourceType.GROUP:
                wanted.setdefault(f, set()).update(_entries(options, _CONSUMER_GROUP_OPERATIONS))
    for f, entries in wanted.items():
        supported = SUPPORTED_OPERATIONS[f.resource_type] | {AclOperation.ALL}
        for entry in entries:
            if entry.operation not in supported:
                names = ", ".join(sorted(o.kafka_name for o in supported))
                raise ValueError(
                    f"{f.resource_type.kafka_name} resources take the operations {names},"
                    f" not {entry.operation.kafka_name}"
                )
    return wanted


def bindings_to_add(options: AclOptions) -> list[AclBinding]:
    if not options.pattern_type.specific:
        raise ValueError(
            f"--resource-pattern-type {options.pattern_type.name.lower()} is for list and"
            " remove; an ACL is literal or prefixed"
        )
    bindings = []
    for f, entries in entries_by_resource(options).items():
        if not entries:
            raise ValueError("name who the ACLs are for: --allow-principal or --deny-principal")
        assert f.name is not None
        pattern = ResourcePattern(f.resource_type, f.name, f.pattern_type)
        bindings += [AclBinding(pattern, e) for e in sorted(entries, key=_entry_key)]
    return bindings


def filters_to_remove(options: AclOptions) -> list[AclBindingFilter]:
    """Per resource: every ACL on it when no principal is named, else exactly the ACLs
    the options describe."""
    filters = []
    for f, entries in entries_by_resource(options).items():
        if not entries:
            filters.append(AclBindingFilter(f, ANY_ENTRY))
        for e in sorted(entries, key=_entry_key):
            filters.append(
                AclBindingFilter(
                    f,
                    AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission_type),
                )
            )
    return filters


def _check_roles(options: AclOptions) -> None:
    if options.producer or options.consumer:
        role = "--producer" if options.producer else "--consumer"
        if options.operations or options.deny_principals or options.deny_hosts:
            raise ValueError(
                f"{role} chooses the operations and only allows: no --operation,"
                " --deny-principal or --deny-host with it"
            )
    if options.producer and not options.topics:
        raise ValueError("--producer needs a --topic")
    if options.idempotent and not options.producer:
        raise ValueError("--idempotent goes with --producer")
    if options.consumer and (
        not options.topics
        or not options.groups
        or (not options.producer and (options.cluster or options.transactional_ids))
    ):
        raise ValueError(
            "--consumer needs a --topic and a --group, and takes no --cluster or --transactional-id"
        )


def _entries(options: AclOptions, operations: tuple[AclOperation, ...]) -> set[AccessControlEntry]:
    entries = set()
    for principals, hosts, permission in (
        (options.allow_principals, options.allow_hosts, AclPermissionType.ALLOW),
        (options.deny_principals, options.deny_hosts, AclPermissionType.DENY),
    ):
        for principal in principals:
            for host in [h.strip() for h in hosts] or [WILDCARD_HOST]:
                for operation in operations:
                    entries.add(
                        AccessControlEntry(_principal(principal), host, operation, permission)
                    )
    return entries


def _principal(text: str) -> str:
    return str(parse_principal(text))  # ValueError says why it is no principal


def _operation(text: str) -> AclOperation:
    try:
        operation = AclOperation.parse(text)
    except ValueError:
        operation = AclOperation.UNKNOWN
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        known = ", ".join(o.kafka_name for o in AclOperation if o.value > AclOperation.ANY)
        raise ValueError(f"no operation {text!r}; known: {known}")
    return operation


def _pattern_type(text: str) -> PatternType:
    try:
        pattern_type = PatternType.parse(text)
    except ValueError:
        pattern_type = PatternType.UNKNOWN
    if pattern_type is PatternType.UNKNOWN:
        raise typer.BadParameter(f"{text!r} is not literal, prefixed, any or match")
    return pattern_type


def _entry_key(entry: AccessControlEntry) -> tuple[Any, ...]:
    return (entry.principal, entry.permission_type, entry.operation, entry.host)


# -- the options ---------------------------------------------------------------------------

Topics = Annotated[
    list[str] | None,
    typer.Option("--topic", metavar="TOPIC", help="A topic ('*': every topic); repeatable."),
]
Groups = Annotated[
    list[str] | None,
    typer.Option(
        "--group", metavar="GROUP", help="A consumer group ('*': every group); repeatable."
    ),
]
Cluster = Annotated[bool, typer.Option("--cluster", help="The cluster resource (kafka-cluster).")]
TransactionalIds = Annotated[
    list[str] | None,
    typer.Option(
        "--transactional-id", metavar="ID", help="A transactional id ('*': every one); repeatable."
    ),
]
DelegationTokens = Annotated[
    list[str] | None,
    typer.Option("--delegation-token", metavar="ID", help="A delegation token by id; repeatable."),
]
UserPrincipals = Annotated[
    list[str] | None,
    typer.Option(
        "--user-principal",
        metavar="User:NAME",
        help="A User resource, for CreateTokens and DescribeTokens on its tokens; repeatable.",
    ),
]
PatternTypeOption = Annotated[
    str,
    typer.Option(
        "--resource-pattern-type",
        help="literal or prefixed; to list or remove also any (any pattern, the name"
        " exactly) or match (every pattern that applies to the name).",
    ),
]
AllowPrincipals = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-principal",
        metavar="PRINCIPAL",
        help="Type:name (User:alice; User:* is everyone); repeatable.",
    ),
]
DenyPrincipals = Annotated[
    list[str] | None,
    typer.Option(
        "--deny-principal",
        metavar="PRINCIPAL",
        help="Type:name; denying wins over allowing; repeatable.",
    ),
]
AllowHosts = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        metavar="HOST",
        help="Address the allowed principals may come from (default *).",
    ),
]
DenyHosts = Annotated[
    list[str] | None,
    typer.Option(
        "--deny-host",
        metavar="HOST",
        help="Address the denied principals are refused from (default *).",
    ),
]
Operations = Annotated[
    list[str] | None,
    typer.Option(
        "--operation",
        metavar="OPERATION",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,"
        " AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All (the default);"
        " repeatable.",
    ),
]
Producer = Annotated[
    bool,
    typer.Option("--producer", help="What a producer needs: Write, Describe, Create on topics."),
]
Consumer = Annotated[
    bool,
    typer.Option(
        "--consumer", help="What a consumer needs: Read, Describe on topics, Read on groups."
    ),
]
Idempotent = Annotated[
    bool,
    typer.Option("--idempotent", help="With --producer: IdempotentWrite on the cluster too."),
]


def _options(**values: Any) -> AclOptions:
    return AclOptions(
        topics=values.get("topic") or [],
        groups=values.get("group") or [],
        cluster=values.get("cluster", False),
        transactional_ids=values.get("transactional_id") or [],
        delegation_tokens=values.get("delegation_token") or [],
        user_principals=values.get("user_principal") or [],
        pattern_type=_pattern_type(values.get("resource_pattern_type", "literal")),
        allow_principals=values.get("allow_principal") or [],
        deny_principals=values.get("deny_principal") or [],
        allow_hosts=values.get("allow_host") or [],
        deny_hosts=values.get("deny_host") or [],
        operations=values.get("operation") or [],
        producer=values.get("producer", False),
        consumer=values.get("consumer", False),
        idempotent=values.get("idempotent", False),
    )


def _planned(plan: Any, options: AclOptions) -> Any:
    """What a plan above makes of the options; its ValueError is a command line that
    cannot be run, as kafka-acls.sh refuses it before asking the brokers."""
    try:
        return plan(options)
    except ValueError as exc:
        raise fail(str(exc), USAGE) from None


@acls_app.command("add")
def add(
    topic: Topics = None,
    group: Groups = None,
    cluster: Cluster = False,
    transactional_id: TransactionalIds = None,
    delegation_token: DelegationTokens = None,
    user_principal: UserPrincipals = None,
    resource_pattern_type: PatternTypeOption = "literal",
    allow_principal: AllowPrincipals = None,
    deny_principal: DenyPrincipals = None,
    allow_host: AllowHosts = None,
    deny_host: DenyHosts = None,
    operation: Operations = None,
    producer: Producer = False,
    consumer: Consumer = False,
    idempotent: Idempotent = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Add ACLs, then show every ACL of the resources named."""
    options = _options(**locals())
    bindings = _planned(bindings_to_add, options)
    with connect(bootstrap) as admin:
        result = admin.create_acls([_to_kafka(b) for b in bindings])
        if result["failed"]:
            raise fail(
                f"cannot add {len(result['failed'])} ACL(s): {error_text(result['failed'][0])}"
            )
        now = _describe(admin, resource_filters(options))
    _show(now, output, f"added {len(bindings)} ACL(s); the ACLs of these resources now:")


@acls_app.command("list")
def list_(
    topic: Topics = None,
    group: Groups = None,
    cluster: Cluster = False,
    transactional_id: TransactionalIds = None,
    delegation_token: DelegationTokens = None,
    user_principal: UserPrincipals = None,
    resource_pattern_type: PatternTypeOption = "literal",
    principal: Annotated[
        list[str] | None,
        typer.Option(
            "--principal", metavar="PRINCIPAL", help="Only the ACLs of this principal; repeatable."
        ),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """List the ACLs of the resources named (every ACL when none is)."""
    options = _options(**locals())
    try:
        filters = resource_filters(options, required=False)
        principals = {_principal(p) for p in principal or []}
    except ValueError as exc:
        raise fail(str(exc), USAGE) from None
    with connect(bootstrap) as admin:
        found = _describe(admin, filters)
    if principals:
        found = [b for b in found if b.entry.principal in principals]
    _show(found, output)


@acls_app.command("remove")
def remove(
    topic: Topics = None,
    group: Groups = None,
    cluster: Cluster = False,
    transactional_id: TransactionalIds = None,
    delegation_token: DelegationTokens = None,
    user_principal: UserPrincipals = None,
    resource_pattern_type: PatternTypeOption = "literal",
    allow_principal: AllowPrincipals = None,
    deny_principal: DenyPrincipals = None,
    allow_host: AllowHosts = None,
    deny_host: DenyHosts = None,
    operation: Operations = None,
    producer: Producer = False,
    consumer: Consumer = False,
    idempotent: Idempotent = False,
    force: Annotated[bool, typer.Option("--force", help="Remove without asking.")] = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Remove ACLs: those the options describe, or every ACL of the resources named when
    no principal is given. Asks first, unless --force."""
    options = _options(**locals())
    filters = _planned(filters_to_remove, options)
    if not force and not _confirmed(filters):
        raise fail("nothing removed: not confirmed (--force removes without asking)")
    with connect(bootstrap) as admin:
        answers = admin.delete_acls([_filter_to_kafka(f) for f in filters])
        removed = []
        for _, matching, error in answers:
            if error.errno != 0:
                raise fail(f"cannot remove ACLs: {error_text(error)}")
            removed += [_from_kafka(acl) for acl in matching]
    _show(removed, output, f"removed {len(removed)} ACL(s):")


def _confirmed(filters: list[AclBindingFilter]) -> bool:
    described = "; ".join(_filter_text(f) for f in filters)
    sys.stderr.write(f"Remove {described}? (y/n) ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():
        sys.stderr.write("\n")  # nobody's typing ended the line
    return answer.strip().lower() in ("y", "yes")


def _filter_text(f: AclBindingFilter) -> str:
    pattern = f.pattern
    what = (
        f"{pattern.resource_type.kafka_name} {pattern.name} ({pattern.pattern_type.name.lower()})"
    )
    if f.entry == ANY_ENTRY:
        return f"every ACL of {what}"
    entry = f.entry
    return (
        f"{entry.permission_type.kafka_name} {entry.operation.kafka_name} for {entry.principal}"
        f" from {entry.host} on {what}"
    )


# -- kafka-python's ACL objects --------------------------------------------------------


def _describe(admin: KafkaAdminClient, filters: list[ResourcePatternFilter]) -> list[AclBinding]:
    found: dict[AclBinding, None] = {}
    for binding_filter in [AclBindingFilter(f, ANY_ENTRY) for f in filters] or [ANY_BINDING]:
        acls, _ = admin.describe_acls(_filter_to_kafka(binding_filter))
        found.update(dict.fromkeys(_from_kafka(acl) for acl in acls))
    return sorted(found, key=_binding_key)


def _to_kafka(binding: AclBinding) -> Any:
    from kafka import admin

    return _kafka_acl(binding, admin.ACL, admin.ResourcePattern)


def _filter_to_kafka(binding_filter: AclBindingFilter) -> Any:
    from kafka import admin

    return _kafka_acl(binding_filter, admin.ACLFilter, admin.ResourcePatternFilter)


def _kafka_acl(binding: AclBinding | AclBindingFilter, acl: Any, resource_pattern: Any) -> Any:
    """kafka-python's ACL or ACLFilter (`acl`, with its `resource_pattern` type) for ours."""
    from kafka import admin

    pattern, entry = binding.pattern, binding.entry
    return acl(
        principal=entry.principal,
        host=entry.host,
        operation=admin.ACLOperation(int(entry.operation)),
        permission_type=admin.ACLPermissionType(int(entry.permission_type)),
        resource_pattern=resource_pattern(
            admin.ResourceType(int(pattern.resource_type)),
            pattern.name,
            admin.ACLResourcePatternType(int(pattern.pattern_type)),
        ),
    )


def _from_kafka(acl: Any) -> AclBinding:
    pattern = acl.resource_pattern
    return AclBinding(
        ResourcePattern(
            ResourceType.from_code(int(pattern.resource_type)),
            pattern.resource_name,
            PatternType.from_code(int(pattern.pattern_type)),
        ),
        AccessControlEntry(
            acl.principal,
            acl.host,
            AclOperation.from_code(int(acl.operation)),
            AclPermissionType.from_code(int(acl.permission_type)),
        ),
    )


def _binding_key(binding: AclBinding) -> tuple[Any, ...]:
    pattern = binding.pattern
    return (pattern.resource_type, pattern.name, pattern.pattern_type, *_entry_key(binding.entry))


# -- output -----------------------------------------------------------------------------

COLUMNS = ("TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")


def _show(bindings: list[AclBinding], output: Any, heading: str | None = None) -> None:
    rows = [
        {
            "resource_type": b.pattern.resource_type.kafka_name,
            "name": b.pattern.name,
            "pattern_type": b.pattern.pattern_type.name.lower(),
            "principal": b.entry.principal,
            "host": b.entry.host,
            "operation": b.entry.operation.kafka_name,
            "permission_type": b.entry.permission_type.kafka_name,
        }
        for b in bindings
    ]
    table = Table(COLUMNS, [tuple(row.values()) for row in rows])
    notes = [] if rows else ["no ACLs"]
    show(View(rows, [table], heading=heading, notes=notes), output)
