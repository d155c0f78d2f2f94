"""The Persister through the share coordinator (Kafka's DefaultStatePersister with its
PersisterStateManager): a share partition's leader keeps its state on whichever broker
leads the partition of `__share_group_state` its key hashes to.

Where this broker leads that partition, the call runs on its own shard, with no request
on the wire. Otherwise it goes to the partition's leader as the state RPC itself, over
the connections brokers keep to each other, as Kafka's persister sends it after its
FindCoordinator: the metadata this broker holds names the same leader that
FindCoordinator would. A coordinator that is moving, loading or unreachable
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, no answer)
is tried again, with backoff and fresh metadata, until `timeout_s` has passed; any
other error is the caller's at once, as a ShareStateError.

The state topic is created by the first call that finds it missing, as Kafka's
FindCoordinator creates it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from herdless.broker.coordinators.share_coordinator import ShareCoordinator
from herdless.broker.peers.connection import PeerError, PeerSecurity
from herdless.broker.peers.pool import PeerPool
from herdless.broker.topics.topic_admin import TopicAdmin, TopicAdminError
from herdless.cluster.metadata import BrokerEndpoint
from herdless.coordinator.share_state import (
    SHARE_GROUP_STATE_TOPIC,
    PartitionState,
    RecordState,
    SharePartitionKey,
    ShareStateError,
    StateBatch,
)
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

STATE_API_VERSION = 0
# How long a call keeps trying a coordinator that is moving or loading.
DEFAULT_TIMEOUT_S = 30.0
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0
# How long one request to another broker may take.
REQUEST_TIMEOUT_S = 10.0
CLIENT_ID_PREFIX = "herdless-share-persister-"
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)

# One call's answer: an error code, or the state it read.
Answer = ErrorCode | PartitionState
# Reads one partition's answer out of a state RPC's partition result.
ParseResult = Callable[[Any], Answer]


class CoordinatorPersister:
    def __init__(
        self,
        shares: ShareCoordinator,
        node_id: int,
        leader_of: Callable[[str, int], BrokerEndpoint | None],
        topic_exists: Callable[[str], bool],
        topics: TopicAdmin,
        replication_factor: int,
        security: PeerSecurity | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.shares = shares
        self.node_id = node_id
        self._leader_of = leader_of
        self._topic_exists = topic_exists
        self._topics = topics
        self._replication_factor = replication_factor
        self._timeout_s = timeout_s
        self._peers = PeerPool(f"{CLIENT_ID_PREFIX}{node_id}", REQUEST_TIMEOUT_S, security)

    # -- the Persister port ----------------------------------------------------------------

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        await self._call(
            key,
            lambda: self.shares.initialize(key, state_epoch, start_offset),
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            {"partition": key.partition, "state_epoch": state_epoch, "start_offset": start_offset},
            _error_only,
        )

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> PartitionState:
        answer = await self._call(
            key,
            lambda: self.shares.read_state(key, leader_epoch),
            ApiKey.READ_SHARE_GROUP_STATE,
            {"partition": key.partition, "leader_epoch": leader_epoch},
            lambda result: _read_state(result, leader_epoch),
        )
        assert isinstance(answer, PartitionState)
        return answer

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
    ) -> None:
        await self._call(
            key,
            lambda: self.shares.write(key, state_epoch, leader_epoch, start_offset, batches),
            ApiKey.WRITE_SHARE_GROUP_STATE,
            {
                "partition": key.partition,
                "state_epoch": state_epoch,
                "leader_epoch": leader_epoch,
                "start_offset": start_offset,
                "state_batches": [
                    {
                        "first_offset": batch.first_offset,
                        "last_offset": batch.last_offset,
                        "delivery_state": int(batch.delivery_state),
                        "delivery_count": batch.delivery_count,
                    }
                    for batch in batches
                ],
            },
            _error_only,
        )

    async def delete(self, key: SharePartitionKey) -> None:
        await self._call(
            key,
            lambda: self.shares.delete(key),
            ApiKey.DELETE_SHARE_GROUP_STATE,
            {"partition": key.partition},
            _error_only,
        )

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> PartitionState:
        answer = await self._call(
            key,
            lambda: self.shares.read_summary(key, leader_epoch),
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
            {"partition": key.partition, "leader_epoch": leader_epoch},
            _summary,
        )
        assert isinstance(answer, PartitionState)
        return answer

    def close(self) -> None:
        self._peers.close()

    # -- finding the coordinator and retrying ----------------------------------------------

    async def _call(
        self,
        key: SharePartitionKey,
        local: Callable[[], Awaitable[Answer]],
        api_key: ApiKey,
        partition_fields: dict[str, Any],
        parse: ParseResult,
    ) -> Answer:
        deadline = time.monotonic() + self._timeout_s
        backoff = FIRST_BACKOFF_S
        while True:
            answer = await self._once(key, local, api_key, partition_fields, parse)
            if isinstance(answer, PartitionState) or answer == ErrorCode.NONE:
                return answer
            if answer not in RETRIABLE:
                raise ShareStateError(answer, f"share state of {key}: {answer.name}")
            if time.monotonic() + backoff > deadline:
                raise ShareStateError(
                    answer,
                    f"no share coordinator answered for {key} within {self._timeout_s:.0f}s"
                    f" ({answer.name})",
                )
            log.debug("share state of %s: %s; trying again", key, answer.name)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _once(
        self,
        key: SharePartitionKey,
        local: Callable[[], Awaitable[Answer]],
        api_key: ApiKey,
        partition_fields: dict[str, Any],
        parse: ParseResult,
    ) -> Answer:
        if self.shares.standalone or not self._topic_exists(SHARE_GROUP_STATE_TOPIC):
            created = await self._create_topic()
            if created is not None:
                return created
        partition = self.shares.partition(key)
        if partition in self.shares.coordinating():
            return await local()
        coordinator = self._leader_of(SHARE_GROUP_STATE_TOPIC, partition)
        if coordinator is None or coordinator.node_id == self.node_id:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            response = await self._peers.request(
                coordinator,
                api_key,
                STATE_API_VERSION,
                group_id=key.group_id,
                topics=[{"topic_id": key.topic_id, "partitions": [partition_fields]}],
            )
        except PeerError as exc:
            log.debug("share state request to broker %d failed: %s", coordinator.node_id, exc)
            return ErrorCode.REQUEST_TIMED_OUT
        for topic in response.results:
            for result in topic.partitions:
                if topic.topic_id == key.topic_id and result.partition == key.partition:
                    return parse(result)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def _create_topic(self) -> ErrorCode | None:
        """The state topic, made if missing; a retriable error if it cannot be yet."""
        if self.shares.standalone:
            if SHARE_GROUP_STATE_TOPIC not in self.shares.host.logs.topics:
                self.shares.start()
            return None
        try:
            await self.shares.create_topic(self._topics, self._replication_factor)
        except TopicAdminError as exc:
            log.warning("cannot create %s yet: %s", SHARE_GROUP_STATE_TOPIC, exc.message)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _error_only(result: Any) -> Answer:
    return _code(result.error_code)


def _read_state(result: Any, leader_epoch: int) -> Answer:
    if result.error_code != ErrorCode.NONE:
        return _code(result.error_code)
    try:
        batches = tuple(
            StateBatch(
                batch.first_offset,
                batch.last_offset,
                RecordState(batch.delivery_state),
                batch.delivery_count,
            )
            for batch in result.state_batches
        )
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    # ReadShareGroupState answers no leader epoch: the coordinator took the one asked.
    return PartitionState(result.state_epoch, result.start_offset, leader_epoch, batches)


def _summary(result: Any) -> Answer:
    if result.error_code != ErrorCode.NONE:
        return _code(result.error_code)
    return PartitionState(result.state_epoch, result.start_offset, result.leader_epoch)
