"""GroupCoordinator.complete_transaction over real partition logs, as WriteTxnMarkers will
call it: the marker is written as a control batch into the group's `__consumer_offsets`
partition, the offsets the transaction committed count from then on, and a restart
that replays the log (transactional batches, markers and all) agrees."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from herdless.broker.coordinators.group_coordinator import GroupCoordinator
from herdless.coordinator import messages as m
from herdless.coordinator import partition_for
from herdless.protocol.control_records import marker_of
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import iter_batches
from tests.broker.test_group_coordinator import PARTITIONS, BrokerStub, coordinator

PRODUCER_ID, EPOCH, COORDINATOR_EPOCH = 31, 4, 2


def txn_commit(group: str, offsets: dict[int, int], producer_id: int, epoch: int = EPOCH) -> Any:
    request = m.TxnOffsetCommitRequest(
        group,
        f"txn-{producer_id}",
        producer_id,
        epoch,
        (m.CommitTopic("t", tuple(m.CommitPartition(p, o) for p, o in offsets.items())),),
    )
    return lambda shard, token, now: shard.txn_offset_commit(request, token, now)


def stable(group: str) -> Any:
    request = m.OffsetFetchRequest(group, (m.FetchTopic("t", (0, 1)),), require_stable=True)
    return lambda shard, token, now: shard.offset_fetch(request, token, now)


def answered(response: m.OffsetFetchResponse) -> dict[int, tuple[int, ErrorCode]]:
    return {p.partition: (p.offset, p.error_code) for t in response.topics for p in t.partitions}


async def started(broker: BrokerStub) -> GroupCoordinator:
    groups = coordinator(broker)
    groups.start()
    await groups.wait_loaded()
    return groups


def test_a_committed_transactions_offsets_count_and_survive_a_restart(tmp_path: Path) -> None:
    partition = partition_for("g", PARTITIONS)

    async def first_life() -> tuple[list[ErrorCode], Any, list[tuple[int, bool]]]:
        broker = BrokerStub(tmp_path)
        groups = await started(broker)
        await groups.run("g", txn_commit("g", {0: 10, 1: 20}, PRODUCER_ID))
        await groups.run("g", txn_commit("g", {0: 99}, PRODUCER_ID + 1))
        assert answered(await groups.run("g", stable("g"))) == {
            0: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
            1: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        }
        results = [
            await groups.complete_transaction(
                partition, PRODUCER_ID, EPOCH, COORDINATOR_EPOCH, committed=True
            ),
            await groups.complete_transaction(
                partition, PRODUCER_ID + 1, EPOCH, COORDINATOR_EPOCH, committed=False
            ),
            # A marker of an older epoch than the producer wrote is refused by the log.
            await groups.complete_transaction(
                partition, PRODUCER_ID, EPOCH - 1, COORDINATOR_EPOCH, committed=True
            ),
        ]
        after = answered(await groups.run("g", stable("g")))
        log = broker.logs.partition("__consumer_offsets", partition)
        assert log is not None
        data = log.read(0, 1 << 20)
        markers = [
            (h.producer_id, marker_of(data[p : p + h.size], h).aborted)
            for p, h in iter_batches(memoryview(data))
            if h.is_control
        ]
        groups.close()
        broker.logs.close()
        return results, after, markers

    async def second_life() -> dict[int, tuple[int, ErrorCode]]:
        broker = BrokerStub(tmp_path)
        groups = await started(broker)
        found = answered(await groups.run("g", stable("g")))
        groups.close()
        broker.logs.close()
        return found

    results, after, markers = asyncio.run(first_life())
    assert results == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH]
    assert after == {0: (10, ErrorCode.NONE), 1: (20, ErrorCode.NONE)}
    assert markers == [(PRODUCER_ID, False), (PRODUCER_ID + 1, True)]
    assert asyncio.run(second_life()) == after


def test_a_partition_this_broker_does_not_lead_is_not_its_to_complete(tmp_path: Path) -> None:
    async def main() -> ErrorCode:
        broker = BrokerStub(tmp_path)
        groups = coordinator(broker)
        # Never started: no offsets partition is loaded here.
        error = await groups.complete_transaction(0, PRODUCER_ID, EPOCH, 0, committed=True)
        groups.close()
        broker.logs.close()
        return error

    assert asyncio.run(main()) is ErrorCode.NOT_COORDINATOR
