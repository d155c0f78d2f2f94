"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeLogDirs."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.group_coordinator import INTERNAL_TOPICS
from herdless.broker.handlers.authorization import (
    REFUSALS,
    authorize_cluster,
    authorized_names,
)
from herdless.broker.replication.replica_manager import PartitionError
from herdless.broker.topics.topic_admin import NewTopic, TopicAdminError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType
from herdless.storage import LogConfig, StorageError

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)


async def handle_create_topics(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.CREATE_TOPICS)
    Result = Response.CreatableTopicResult
    adding = sum(
        len(t.assignments)
        or (context.config.num_partitions if t.num_partitions == -1 else t.num_partitions)
        for t in body.topics
    )
    refused = _over_request_limit(context, adding)
    names = [t.name for t in body.topics]
    # CREATE on the cluster, else on each topic; the configs and layout of a topic are
    # told only to a caller that may DESCRIBE_CONFIGS it.
    if authorize_cluster(context, request, AclOperation.CREATE, log_denied=False):
        creatable = set(names)
    else:
        creatable = authorized_names(
            context, request, AclOperation.CREATE, ResourceType.TOPIC, names
        )
    configs_described = authorized_names(
        context, request, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names, log_denied=False
    )
    results = []
    for wanted in body.topics:
        result = Result(name=wanted.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(result)
        if wanted.name not in creatable:
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.error_message = "Authorization failed."
            continue
        if refused is not None:
            result.error_code, result.error_message = refused.error_code, refused.message
            continue
        configs = {c.name: c.value for c in wanted.configs}
        new_topic = NewTopic(
            wanted.name,
            wanted.num_partitions,
            wanted.replication_factor,
            {a.partition_index: list(a.broker_ids) for a in wanted.assignments} or None,
            configs,
        )
        try:
            created = await context.topics.create_topic(
                new_topic, validate_only=body.validate_only, timeout_ms=body.timeout_ms
            )
        except TopicAdminError as exc:
            result.error_code = exc.error_code
            result.error_message = exc.message
            continue
        if wanted.name not in configs_described:
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        result.num_partitions = created.num_partitions
        result.replication_factor = created.replication_factor
        result.configs = _topic_configs(created.config, Result.CreatableTopicConfigs)
        if created.topic_id is not None:
            result.topic_id = created.topic_id
    return Response(throttle_time_ms=0, topics=results)


def _topic_configs(config: LogConfig, Entry: Any) -> list[Any]:
    return [
        Entry(
            name=key,
            value=value,
            read_only=False,
            config_source=config.config_source(key),
            is_sensitive=False,
        )
        for key, value in sorted(config.to_topic_configs().items())
    ]


async def handle_delete_topics(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.DELETE_TOPICS)
    Result = Response.DeletableTopicResult
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    resolved = [
        name or (context.metadata.topic_name(topic_id) if topic_id is not None else None)
        for name, topic_id in wanted
    ]
    # As Kafka: a topic named by id is refused without its name to a caller that may not
    # DESCRIBE it; otherwise DELETE decides, before whether the topic exists is told.
    known = [name for name in resolved if name is not None]
    describable = authorized_names(
        context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, known
    )
    deletable = authorized_names(context, request, AclOperation.DELETE, ResourceType.TOPIC, known)
    results = []
    for (requested, topic_id), name in zip(wanted, resolved, strict=True):
        result = Result(
            name=requested, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None
        )
        results.append(result)
        if name is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            continue
        if not requested and name not in describable:
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        if name not in deletable:
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.name = name
            continue
        described = context.metadata.topic(name)
        if described is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if name in INTERNAL_TOPICS:
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            result.error_message = f"{name} is internal and cannot be deleted"
            continue
        if not context.config.delete_topic_enable:
            result.error_code = ErrorCode.POLICY_VIOLATION
            result.error_message = "topic deletion is disabled (delete.topic.enable=false)"
            continue
        result.name, result.topic_id = name, described.topic_id
        local = context.logs.topics.get(name)
        if local is not None:
            for partition_log in local.partitions.values():
                context.replicas.forget(partition_log)
        try:
            await context.topics.delete_topic(name)
        except TopicAdminError as exc:
            result.error_code = exc.error_code
            result.error_message = exc.message
    return Response(throttle_time_ms=0, responses=results)


def _over_request_limit(context: BrokerContext, adding: int) -> TopicAdminError | None:
    """The whole request refused, before any topic in it is touched."""
    try:
        context.topics.limits.check_request(adding)
    except TopicAdminError as exc:
        return exc
    return None


async def handle_create_partitions(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.CREATE_PARTITIONS)
    Result = Response.CreatePartitionsTopicResult
    adding = 0
    for wanted in body.topics:
        described = context.metadata.topic(wanted.name)
        adding += max(0, wanted.count - (len(described.partitions) if described else 0))
    refused = _over_request_limit(context, adding)
    alterable = authorized_names(
        context, request, AclOperation.ALTER, ResourceType.TOPIC, [t.name for t in body.topics]
    )
    results = []
    for wanted in body.topics:
        result = Result(name=wanted.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(result)
        if wanted.name not in alterable:
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.error_message = "The topic authorization is failed."
            continue
        if refused is not None:
            result.error_code, result.error_message = refused.error_code, refused.message
            continue
        if wanted.name in INTERNAL_TOPICS:
            # Groups are placed by hashing over the partition count.
            result.error_code = ErrorCode.INVALID_PARTITIONS
            result.error_message = f"{wanted.name} is internal; its partition count is fixed"
            continue
        assignment = (
            [list(a.broker_ids) for a in wanted.assignments] if wanted.assignments else None
        )
        try:
            await context.topics.create_partitions(
                wanted.name, wanted.count, assignment, validate_only=body.validate_only
            )
        except TopicAdminError as exc:
            result.error_code = exc.error_code
            result.error_message = exc.message
    return Response(throttle_time_ms=0, results=results)


async def handle_delete_records(context: BrokerContext, request: Request) -> Any:
    """Move partitions' log start offsets forward; offset -1 means the high watermark."""
    Response = response_class(ApiKey.DELETE_RECORDS)
    TopicResult = Response.DeleteRecordsTopicResult
    PartitionResult = TopicResult.DeleteRecordsPartitionResult
    deletable = authorized_names(
        context,
        request,
        AclOperation.DELETE,
        ResourceType.TOPIC,
        [t.name for t in request.body.topics],
    )
    topics = []
    for wanted in request.body.topics:
        results = []
        for p in wanted.partitions:
            result = PartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.NONE
            )
            results.append(result)
            if wanted.name not in deletable:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                partition_log = context.replicas.leader_log(wanted.name, p.partition_index)
            except PartitionError as exc:
                result.error_code = exc.error_code
                continue
            if wanted.name in INTERNAL_TOPICS:
                # As Kafka: the coordinator's own records are not for clients to cut.
                result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            else:
                try:
                    result.low_watermark = partition_log.delete_records(p.offset)
                except StorageError as exc:
                    result.error_code = exc.error_code
                else:
                    log.info(
                        "%s-%d: records before %d deleted",
                        wanted.name,
                        p.partition_index,
                        result.low_watermark,
                    )
        topics.append(TopicResult(name=wanted.name, partitions=results))
    return Response(throttle_time_ms=0, topics=topics)


async def handle_describe_log_dirs(context: BrokerContext, request: Request) -> Any:
    """The one data directory, with the size of each partition in it (admin UIs show these)."""
    Response = response_class(ApiKey.DESCRIBE_LOG_DIRS)
    Result = Response.DescribeLogDirsResult
    TopicEntry = Result.DescribeLogDirsTopic
    PartitionEntry = TopicEntry.DescribeLogDirsPartition
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return Response(
            throttle_time_ms=0, error_code=REFUSALS[ResourceType.CLUSTER][0], results=[]
        )
    wanted = request.body.topics
    if wanted is None:
        selection = {name: None for name in context.logs.topics}
    else:
        selection = {t.topic: set(t.partitions) for t in wanted}
    topics = []
    for name, partitions in selection.items():
        topic = context.logs.topics.get(name)
        if topic is None:
            continue  # as Kafka: partitions not in this directory are left out
        entries = [
            PartitionEntry(
                partition_index=partition_log.partition,
                partition_size=partition_log.size_bytes,
                offset_lag=0,  # as Kafka reports a current (not future) log
                is_future_key=False,
            )
            for partition_log in topic.partitions.values()
            if partitions is None or partition_log.partition in partitions
        ]
        if entries:
            topics.append(TopicEntry(name=name, partitions=entries))
    data_dir = Path(context.config.data_dir).resolve()
    usage = shutil.disk_usage(data_dir)
    result = Result(
        error_code=ErrorCode.NONE,
        log_dir=str(data_dir),
        topics=topics,
        total_bytes=usage.total,
        usable_bytes=usage.free,
    )
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result])
