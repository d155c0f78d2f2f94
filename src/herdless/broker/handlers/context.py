"""What a request handler may use: the broker's parts, never the broker itself.

Handlers get a BrokerContext and reach the logs through the replica manager,
the cluster through the metadata view and groups through the coordinator. The
Broker builds the context and owns the lifecycle, the sockets and the clock;
nothing here imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from herdless.broker.auth.acl_store import AclStore
from herdless.broker.auth.authorizer_audit import AuthorizerAudit
from herdless.broker.auth.credential_store import CredentialStore
from herdless.broker.auth.delegation_tokens import DelegationTokenManager
from herdless.broker.config import BrokerConfig
from herdless.broker.coordinators.group_config_store import GroupConfigStore
from herdless.broker.coordinators.group_coordinator import GroupCoordinator
from herdless.broker.coordinators.share_coordinator import ShareCoordinator
from herdless.broker.coordinators.transaction_coordinator import TransactionCoordinator
from herdless.broker.dynamic_config.layers import DynamicBrokerConfig
from herdless.broker.dynamic_config.store import BrokerConfigStore
from herdless.broker.handlers.fetch_sessions import FetchSessionCache
from herdless.broker.producer_ids import ProducerIds
from herdless.broker.quotas.manager import ClientQuotaManager
from herdless.broker.quotas.store import QuotaStore
from herdless.broker.replication.replica_manager import ReplicaManager
from herdless.broker.share.leader import ShareLeader
from herdless.broker.share.persister import Persister
from herdless.broker.telemetry.manager import ClientMetricsManager
from herdless.broker.telemetry.store import ClientMetricsStore
from herdless.broker.topics.topic_admin import TopicAdmin
from herdless.cluster.controller import Controller
from herdless.cluster.metadata import MetadataView
from herdless.storage import LogManager


@dataclass(eq=False)
class BrokerContext:
    config: BrokerConfig
    logs: LogManager
    replicas: ReplicaManager
    metadata: MetadataView
    topics: TopicAdmin
    groups: GroupCoordinator
    producer_ids: ProducerIds
    fetch_sessions: FetchSessionCache
    # The port actually bound (config.port may be 0: any free port).
    bound_port: int = 0
    # The port each listener bound, by listener name.
    bound_ports: dict[str, int] = field(default_factory=dict)
    # Set when shutdown begins: long polls answer at once and connections stop reading.
    stopping: bool = False
    # The ACLs and the authorizer deciding from them (acls.authorizer); None when no
    # authorizer.class.name is set: everything is allowed, and the ACL APIs answer
    # SECURITY_DISABLED.
    acls: AclStore | None = None
    # The authorizer log and decision counts (broker/handlers/authorization.py).
    authorizer_audit: AuthorizerAudit = field(default_factory=AuthorizerAudit)
    # Consumer groups' own configs (KIP-848), where this broker keeps them.
    group_configs: GroupConfigStore | None = None
    # Users' SCRAM credentials: the CredentialCache SASL checks logins against.
    credentials: CredentialStore | None = None
    # Delegation tokens (KIP-48); None without delegation.token.secret.key (the token
    # APIs answer DELEGATION_TOKEN_AUTH_DISABLED).
    delegation_tokens: DelegationTokenManager | None = None
    # Client quotas in force and clients' measured rates (KIP-13, KIP-55, KIP-124), and
    # where they are kept.
    quotas: ClientQuotaManager | None = None
    quota_store: QuotaStore | None = None
    # Client telemetry (KIP-714): the subscriptions and the client instances that push,
    # and where the subscriptions are kept.
    client_metrics: ClientMetricsManager | None = None
    client_metrics_store: ClientMetricsStore | None = None
    # The transaction coordinator's shards on this broker.
    transactions: TransactionCoordinator | None = None
    # The share coordinator's shards on this broker (KIP-932).
    share_coordinator: ShareCoordinator | None = None
    # Where share partitions led here keep their state (the Persister port).
    share_persister: Persister | None = None
    # The share partitions this broker leads and their consumers' share sessions.
    share_partitions: ShareLeader | None = None
    # In a cluster, this broker's controller while it is the active one (ElectLeaders,
    # ControlledShutdown); None otherwise, and always on one broker alone.
    controller: Callable[[], Controller | None] = lambda: None
    # Told the bytes of records each consumer fetch is answered with, by topic (Kafka's
    # BytesOutPerSec): where consumers read, when they may read from followers.
    bytes_out: Callable[[str, int], None] = lambda topic, size: None
    # The broker's settings with the dynamic configs over them, and where those are kept.
    dynamic_config: DynamicBrokerConfig | None = None
    broker_config_store: BrokerConfigStore | None = None

    @property
    def node_id(self) -> int:
        return self.config.node_id
