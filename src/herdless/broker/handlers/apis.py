"""The APIs herdless serves, with the version ranges it advertises.

The ranges are what is implemented, shaped by what real clients need
(docs: CLIENTS.md in the design notes): minimums stay low because librdkafka
needs exact overlaps, and kafka-python infers the broker's release from them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from herdless.broker.handlers import (
    acls,
    admin,
    cluster,
    configs,
    consumer_groups,
    coordinator,
    fetch,
    groups,
    leader_epochs,
    list_offsets,
    produce,
    sasl,
    users,
)
from herdless.broker.handlers.context import BrokerContext
from herdless.protocol.codec import Request, encode_response, response_class
from herdless.protocol.errors import ErrorCode

Handler = Callable[[BrokerContext, Request], Awaitable[Any]]

API_VERSIONS_KEY = 18


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


async def _api_versions(context: BrokerContext, request: Request) -> Any:
    response = response_class(API_VERSIONS_KEY)
    return response(
        error_code=ErrorCode.NONE,
        api_keys=_advertised(),
        throttle_time_ms=0,
    )


def _advertised() -> list[Any]:
    entry = response_class(API_VERSIONS_KEY).ApiVersion
    return [
        entry(api_key=api.key, min_version=api.min_version, max_version=api.max_version)
        for api in APIS.values()
    ]


def unsupported_api_versions(correlation_id: int) -> bytes:
    response = response_class(API_VERSIONS_KEY)(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_advertised()
    )
    return encode_response(response, 0, correlation_id)


_TABLE = [
    Api(0, "Produce", 0, 11, produce.handle_produce),
    Api(1, "Fetch", 0, 17, fetch.handle_fetch),
    Api(2, "ListOffsets", 0, 9, list_offsets.handle_list_offsets),
    Api(3, "Metadata", 0, 12, cluster.handle_metadata),
    Api(8, "OffsetCommit", 0, 9, groups.handle_offset_commit),
    Api(9, "OffsetFetch", 0, 9, groups.handle_offset_fetch),
    Api(10, "FindCoordinator", 0, 6, coordinator.handle_find_coordinator),
    Api(11, "JoinGroup", 0, 9, groups.handle_join_group),
    Api(12, "Heartbeat", 0, 4, groups.handle_heartbeat),
    Api(13, "LeaveGroup", 0, 5, groups.handle_leave_group),
    Api(14, "SyncGroup", 0, 5, groups.handle_sync_group),
    Api(15, "DescribeGroups", 0, 5, groups.handle_describe_groups),
    Api(16, "ListGroups", 0, 5, groups.handle_list_groups),
    Api(17, "SaslHandshake", 0, 1, sasl.handle_sasl_handshake),
    Api(18, "ApiVersions", 0, 4, _api_versions),
    Api(19, "CreateTopics", 0, 7, admin.handle_create_topics),
    Api(20, "DeleteTopics", 0, 6, admin.handle_delete_topics),
    Api(21, "DeleteRecords", 0, 2, admin.handle_delete_records),
    Api(22, "InitProducerId", 0, 5, produce.handle_init_producer_id),
    Api(23, "OffsetForLeaderEpoch", 0, 4, leader_epochs.handle_offset_for_leader_epoch),
    Api(29, "DescribeAcls", 0, 3, acls.handle_describe_acls),
    Api(30, "CreateAcls", 0, 3, acls.handle_create_acls),
    Api(31, "DeleteAcls", 0, 3, acls.handle_delete_acls),
    Api(32, "DescribeConfigs", 0, 4, configs.handle_describe_configs),
    Api(33, "AlterConfigs", 0, 2, configs.handle_alter_configs),
    Api(35, "DescribeLogDirs", 0, 4, admin.handle_describe_log_dirs),
    Api(36, "SaslAuthenticate", 0, 2, sasl.handle_sasl_authenticate),
    Api(37, "CreatePartitions", 0, 3, admin.handle_create_partitions),
    Api(42, "DeleteGroups", 0, 2, groups.handle_delete_groups),
    Api(44, "IncrementalAlterConfigs", 0, 1, configs.handle_incremental_alter_configs),
    Api(47, "OffsetDelete", 0, 0, groups.handle_offset_delete),
    Api(50, "DescribeUserScramCredentials", 0, 0, users.handle_describe_user_scram_credentials),
    Api(51, "AlterUserScramCredentials", 0, 0, users.handle_alter_user_scram_credentials),
    Api(60, "DescribeCluster", 0, 1, cluster.handle_describe_cluster),
    Api(68, "ConsumerGroupHeartbeat", 0, 1, consumer_groups.handle_consumer_group_heartbeat),
    Api(69, "ConsumerGroupDescribe", 0, 1, consumer_groups.handle_consumer_group_describe),
]

APIS: dict[int, Api] = {api.key: api for api in _TABLE}
