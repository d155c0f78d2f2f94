"""The APIs herdless serves, with the version ranges it advertises.

The ranges are what is implemented, shaped by what real clients need
(docs: CLIENTS.md in the design notes): minimums stay low because librdkafka
needs exact overlaps, and kafka-python infers the broker's release from them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from herdless.broker.config import BrokerConfig
from herdless.broker.handlers import (
    acls,
    admin,
    client_quotas,
    cluster,
    config_resources,
    configs,
    consumer_groups,
    coordinator,
    delegation_tokens,
    fetch,
    groups,
    leader_epochs,
    leadership,
    list_offsets,
    produce,
    producers,
    reassignments,
    sasl,
    share_acknowledge,
    share_fetch,
    share_groups,
    share_offsets,
    share_state,
    telemetry,
    topic_partitions,
    transactions,
    users,
)
from herdless.broker.handlers.context import BrokerContext
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, encode_response, response_class
from herdless.protocol.errors import ErrorCode

Handler = Callable[[BrokerContext, Request], Awaitable[Any]]


def _always(config: BrokerConfig) -> bool:
    return True


def _share_groups(config: BrokerConfig) -> bool:
    """group.share.enable: Kafka 4.2 serves share groups by default (share.version 1)."""
    return config.group_share_enable


@dataclass(frozen=True, slots=True)
class Api:
    key: ApiKey
    min_version: int
    max_version: int
    handler: Handler
    # Whether the broker's settings serve the API: one they do not is neither advertised
    # nor answered, as Kafka does with APIs behind a feature.
    served: Callable[[BrokerConfig], bool] = _always
    # Kafka's name (Produce, ...), as requests are counted and refused under it.
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.key.kafka_name)


async def _api_versions(context: BrokerContext, request: Request) -> Any:
    software = getattr(request.body, "client_software_name", None)
    if software and request.session is not None:
        # What client telemetry's client_software_name/version selectors match.
        request.session.software.name = software
        request.session.software.version = request.body.client_software_version or ""
    response = response_class(ApiKey.API_VERSIONS)
    return response(
        error_code=ErrorCode.NONE,
        api_keys=_advertised(context.config),
        throttle_time_ms=0,
    )


def _advertised(config: BrokerConfig) -> list[Any]:
    entry = response_class(ApiKey.API_VERSIONS).ApiVersion
    return [
        entry(api_key=api.key, min_version=api.min_version, max_version=api.max_version)
        for api in APIS.values()
        if api.served(config)
    ]


def unsupported_api_versions(correlation_id: int, config: BrokerConfig) -> bytes:
    response = response_class(ApiKey.API_VERSIONS)(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_advertised(config)
    )
    return encode_response(response, 0, correlation_id)


_TABLE = [
    Api(ApiKey.PRODUCE, 0, 12, produce.handle_produce),
    Api(ApiKey.FETCH, 0, 17, fetch.handle_fetch),
    Api(ApiKey.LIST_OFFSETS, 0, 9, list_offsets.handle_list_offsets),
    Api(ApiKey.METADATA, 0, 12, cluster.handle_metadata),
    # v0's request header has no client id, which this broker's framing expects.
    Api(ApiKey.CONTROLLED_SHUTDOWN, 1, 3, leadership.handle_controlled_shutdown),
    Api(ApiKey.OFFSET_COMMIT, 0, 9, groups.handle_offset_commit),
    Api(ApiKey.OFFSET_FETCH, 0, 9, groups.handle_offset_fetch),
    Api(ApiKey.FIND_COORDINATOR, 0, 6, coordinator.handle_find_coordinator),
    Api(ApiKey.JOIN_GROUP, 0, 9, groups.handle_join_group),
    Api(ApiKey.HEARTBEAT, 0, 4, groups.handle_heartbeat),
    Api(ApiKey.LEAVE_GROUP, 0, 5, groups.handle_leave_group),
    Api(ApiKey.SYNC_GROUP, 0, 5, groups.handle_sync_group),
    Api(ApiKey.DESCRIBE_GROUPS, 0, 5, groups.handle_describe_groups),
    Api(ApiKey.LIST_GROUPS, 0, 5, groups.handle_list_groups),
    Api(ApiKey.SASL_HANDSHAKE, 0, 1, sasl.handle_sasl_handshake),
    Api(ApiKey.API_VERSIONS, 0, 4, _api_versions),
    Api(ApiKey.CREATE_TOPICS, 0, 7, admin.handle_create_topics),
    Api(ApiKey.DELETE_TOPICS, 0, 6, admin.handle_delete_topics),
    Api(ApiKey.DELETE_RECORDS, 0, 2, admin.handle_delete_records),
    Api(ApiKey.INIT_PRODUCER_ID, 0, 5, produce.handle_init_producer_id),
    Api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4, leader_epochs.handle_offset_for_leader_epoch),
    Api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, transactions.handle_add_partitions_to_txn),
    Api(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, transactions.handle_add_offsets_to_txn),
    Api(ApiKey.END_TXN, 0, 5, transactions.handle_end_txn),
    Api(ApiKey.WRITE_TXN_MARKERS, 0, 2, transactions.handle_write_txn_markers),
    Api(ApiKey.TXN_OFFSET_COMMIT, 0, 5, groups.handle_txn_offset_commit),
    Api(ApiKey.DESCRIBE_ACLS, 0, 3, acls.handle_describe_acls),
    Api(ApiKey.CREATE_ACLS, 0, 3, acls.handle_create_acls),
    Api(ApiKey.DELETE_ACLS, 0, 3, acls.handle_delete_acls),
    Api(ApiKey.DESCRIBE_CONFIGS, 0, 4, configs.handle_describe_configs),
    Api(ApiKey.ALTER_CONFIGS, 0, 2, configs.handle_alter_configs),
    Api(ApiKey.DESCRIBE_LOG_DIRS, 0, 4, admin.handle_describe_log_dirs),
    Api(ApiKey.SASL_AUTHENTICATE, 0, 2, sasl.handle_sasl_authenticate),
    Api(ApiKey.CREATE_PARTITIONS, 0, 3, admin.handle_create_partitions),
    Api(
        ApiKey.CREATE_DELEGATION_TOKEN,
        0,
        3,
        delegation_tokens.handle_create_delegation_token,
    ),
    Api(ApiKey.RENEW_DELEGATION_TOKEN, 0, 2, delegation_tokens.handle_renew_delegation_token),
    Api(ApiKey.EXPIRE_DELEGATION_TOKEN, 0, 2, delegation_tokens.handle_expire_delegation_token),
    Api(
        ApiKey.DESCRIBE_DELEGATION_TOKEN,
        0,
        3,
        delegation_tokens.handle_describe_delegation_token,
    ),
    Api(ApiKey.DELETE_GROUPS, 0, 2, groups.handle_delete_groups),
    Api(ApiKey.ELECT_LEADERS, 0, 2, leadership.handle_elect_leaders),
    Api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, configs.handle_incremental_alter_configs),
    Api(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        1,
        reassignments.handle_alter_partition_reassignments,
    ),
    Api(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        0,
        0,
        reassignments.handle_list_partition_reassignments,
    ),
    Api(ApiKey.OFFSET_DELETE, 0, 0, groups.handle_offset_delete),
    Api(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, client_quotas.handle_describe_client_quotas),
    Api(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, client_quotas.handle_alter_client_quotas),
    Api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, users.handle_describe_user_scram_credentials),
    Api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, users.handle_alter_user_scram_credentials),
    Api(ApiKey.DESCRIBE_CLUSTER, 0, 1, cluster.handle_describe_cluster),
    Api(ApiKey.DESCRIBE_PRODUCERS, 0, 0, producers.handle_describe_producers),
    Api(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, transactions.handle_describe_transactions),
    Api(ApiKey.LIST_TRANSACTIONS, 0, 2, transactions.handle_list_transactions),
    Api(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, consumer_groups.handle_consumer_group_heartbeat),
    Api(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, consumer_groups.handle_consumer_group_describe),
    # KIP-714, which Kafka's ZooKeeper-mode brokers never served; herdless does.
    Api(
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        0,
        telemetry.handle_get_telemetry_subscriptions,
    ),
    Api(ApiKey.PUSH_TELEMETRY, 0, 0, telemetry.handle_push_telemetry),
    # v0 (ListClientMetricsResources) lists subscriptions alone; v1 (KIP-1142) lists
    # every config resource.
    Api(ApiKey.LIST_CONFIG_RESOURCES, 0, 1, config_resources.handle_list_config_resources),
    Api(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, topic_partitions.handle_describe_topic_partitions),
    # Kafka 4.2 serves v1 alone (v0 was 4.0's early access); librdkafka sends v1.
    Api(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        1,
        share_groups.handle_share_group_heartbeat,
        _share_groups,
    ),
    Api(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, share_groups.handle_share_group_describe, _share_groups),
    # KIP-932 at v1, the first stable version (Kafka 4.1), which librdkafka sends.
    Api(ApiKey.SHARE_FETCH, 1, 1, share_fetch.handle_share_fetch, _share_groups),
    Api(ApiKey.SHARE_ACKNOWLEDGE, 1, 1, share_acknowledge.handle_share_acknowledge, _share_groups),
    Api(
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        0,
        0,
        share_state.handle_initialize_share_group_state,
    ),
    Api(ApiKey.READ_SHARE_GROUP_STATE, 0, 0, share_state.handle_read_share_group_state),
    Api(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 0, share_state.handle_write_share_group_state),
    Api(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0, share_state.handle_delete_share_group_state),
    Api(
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        0,
        0,
        share_state.handle_read_share_group_state_summary,
    ),
    # The admin APIs of Kafka 4.2: DescribeShareGroupOffsets v1 adds each partition's lag.
    Api(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        0,
        1,
        share_offsets.handle_describe_share_group_offsets,
        _share_groups,
    ),
    Api(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        0,
        0,
        share_offsets.handle_alter_share_group_offsets,
        _share_groups,
    ),
    Api(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        0,
        0,
        share_offsets.handle_delete_share_group_offsets,
        _share_groups,
    ),
]

APIS: dict[int, Api] = {api.key: api for api in _TABLE}
