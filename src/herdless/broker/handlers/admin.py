"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeLogDirs."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from herdless.broker.group_coordinator import INTERNAL_TOPICS
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.storage import LogConfig, StorageError

if TYPE_CHECKING:
    from herdless.broker.broker import Broker

log = logging.getLogger(__name__)

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
DELETE_RECORDS = 21
DESCRIBE_LOG_DIRS = 35


async def handle_create_topics(broker: Broker, request: Request) -> Any:
    body = request.body
    Response = response_class(CREATE_TOPICS)
    Result = Response.CreatableTopicResult
    results = []
    for wanted in body.topics:
        result = Result(name=wanted.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(result)
        num_partitions = wanted.num_partitions
        if wanted.assignments:
            num_partitions = len(wanted.assignments)
            if any(set(a.broker_ids) != {broker.node_id} for a in wanted.assignments):
                result.error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                result.error_message = f"this cluster has one broker, id {broker.node_id}"
                continue
        elif num_partitions == -1:
            num_partitions = broker.config.num_partitions
        if wanted.replication_factor not in (-1, 1) and not wanted.assignments:
            result.error_code = ErrorCode.INVALID_REPLICATION_FACTOR
            result.error_message = (
                f"replication factor {wanted.replication_factor} is larger than"
                " the 1 broker available"
            )
            continue
        configs = {c.name: c.value for c in wanted.configs}
        try:
            if body.validate_only:
                broker.logs.check_new_topic(wanted.name, num_partitions, configs)
                topic = None
            else:
                topic = broker.logs.create_topic(wanted.name, num_partitions, configs)
                log.info("created topic %s with %d partitions", wanted.name, num_partitions)
        except StorageError as exc:
            result.error_code = exc.error_code
            result.error_message = str(exc)
            continue
        result.num_partitions = num_partitions
        result.replication_factor = 1
        result.configs = _topic_configs(broker, wanted.name, Result.CreatableTopicConfigs, configs)
        if topic is not None:
            result.topic_id = topic.topic_id
    return Response(throttle_time_ms=0, topics=results)


def _topic_configs(broker: Broker, name: str, Entry: Any, explicit: dict[str, str]) -> list[Any]:
    config = LogConfig.from_topic_configs(explicit, broker.logs.default_config)
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


async def handle_delete_topics(broker: Broker, request: Request) -> Any:
    body = request.body
    Response = response_class(DELETE_TOPICS)
    Result = Response.DeletableTopicResult
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    for name, topic_id in wanted:
        topic = broker.logs.topics.get(name) if name else broker.logs.topic_by_id(topic_id)
        result = Result(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None)
        results.append(result)
        if topic is None:
            missing_by_id = not name and topic_id is not None
            result.error_code = (
                ErrorCode.UNKNOWN_TOPIC_ID
                if missing_by_id
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            continue
        if topic.name in INTERNAL_TOPICS:
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            result.error_message = f"{topic.name} is internal and cannot be deleted"
            continue
        if not broker.config.delete_topic_enable:
            result.error_code = ErrorCode.POLICY_VIOLATION
            result.error_message = "topic deletion is disabled (delete.topic.enable=false)"
            continue
        result.name, result.topic_id = topic.name, topic.topic_id
        for partition_log in topic.partitions.values():
            broker.forget_log(partition_log)
        broker.logs.delete_topic(topic.name)
        log.info("deleted topic %s", topic.name)
    return Response(throttle_time_ms=0, responses=results)


async def handle_create_partitions(broker: Broker, request: Request) -> Any:
    body = request.body
    Response = response_class(CREATE_PARTITIONS)
    Result = Response.CreatePartitionsTopicResult
    results = []
    for wanted in body.topics:
        result = Result(name=wanted.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(result)
        topic = broker.logs.topics.get(wanted.name)
        if topic is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if topic.name in INTERNAL_TOPICS:
            # Groups are placed by hashing over the partition count.
            result.error_code = ErrorCode.INVALID_PARTITIONS
            result.error_message = f"{topic.name} is internal; its partition count is fixed"
            continue
        if wanted.count <= topic.partition_count:
            result.error_code = ErrorCode.INVALID_PARTITIONS
            result.error_message = (
                f"topic {wanted.name!r} has {topic.partition_count} partitions;"
                f" the new count {wanted.count} must be larger"
            )
            continue
        if not body.validate_only:
            broker.logs.create_partitions(wanted.name, wanted.count)
            log.info("topic %s now has %d partitions", wanted.name, wanted.count)
    return Response(throttle_time_ms=0, results=results)


async def handle_delete_records(broker: Broker, request: Request) -> Any:
    """Move partitions' log start offsets forward; offset -1 means the high watermark."""
    Response = response_class(DELETE_RECORDS)
    TopicResult = Response.DeleteRecordsTopicResult
    PartitionResult = TopicResult.DeleteRecordsPartitionResult
    topics = []
    for wanted in request.body.topics:
        results = []
        for p in wanted.partitions:
            result = PartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.NONE
            )
            results.append(result)
            partition_log = broker.logs.partition(wanted.name, p.partition_index)
            if partition_log is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif wanted.name in INTERNAL_TOPICS:
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


async def handle_describe_log_dirs(broker: Broker, request: Request) -> Any:
    """The one data directory, with the size of each partition in it (admin UIs show these)."""
    Response = response_class(DESCRIBE_LOG_DIRS)
    Result = Response.DescribeLogDirsResult
    TopicEntry = Result.DescribeLogDirsTopic
    PartitionEntry = TopicEntry.DescribeLogDirsPartition
    wanted = request.body.topics
    if wanted is None:
        selection = {name: None for name in broker.logs.topics}
    else:
        selection = {t.topic: set(t.partitions) for t in wanted}
    topics = []
    for name, partitions in selection.items():
        topic = broker.logs.topics.get(name)
        if topic is None:
            continue  # as Kafka: partitions not in this directory are left out
        entries = [
            PartitionEntry(
                partition_index=partition_log.partition,
                partition_size=partition_log.size_bytes,
                offset_lag=0,  # the only replica is the leader
                is_future_key=False,
            )
            for partition_log in topic.partitions.values()
            if partitions is None or partition_log.partition in partitions
        ]
        if entries:
            topics.append(TopicEntry(name=name, partitions=entries))
    data_dir = Path(broker.config.data_dir).resolve()
    usage = shutil.disk_usage(data_dir)
    result = Result(
        error_code=ErrorCode.NONE,
        log_dir=str(data_dir),
        topics=topics,
        total_bytes=usage.total,
        usable_bytes=usage.free,
    )
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result])
