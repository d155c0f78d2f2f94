"""The controller's steps of a reassignment (KIP-455) against a real ZooKeeper, a leader's
ISR changes written by hand: the replica set with the replicas adding and removing, the
wait for the target to be in sync, a leaving leader replaced from the target, the ISR
and the replicas shrunk to the target; a cancel back to the original replicas."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from herdless.cluster.controller import Controller
from herdless.cluster.layout import BrokerRegistration, PartitionState, TopicAssignment
from herdless.cluster.store import ClusterStore
from herdless.protocol.errors import ErrorCode
from tests.cluster.conftest import OpenStore
from tests.support.members import wait_until

BROKERS = [BrokerRegistration(b, "127.0.0.1", 9090 + b) for b in (1, 2, 3)]


def state(store: ClusterStore, topic: str) -> tuple[int, tuple[int, ...]] | None:
    found = store.get_partition_state(topic, 0)
    return None if found is None else (found.value.leader, found.value.isr)


def assignment(store: ClusterStore, topic: str) -> TopicAssignment:
    found = store.topic(topic)
    assert found is not None
    return found.value


def join_isr(store: ClusterStore, topic: str, replica: int) -> None:
    """What the leader does once a follower has caught up."""
    current = store.get_partition_state(topic, 0)
    assert current is not None
    isr = (*current.value.isr, replica)
    grown = PartitionState(
        current.value.leader, current.value.leader_epoch, isr, current.value.controller_epoch
    )
    store.update_partition_state(topic, 0, grown, current.version)


def test_a_reassignment_completes_once_the_target_is_in_sync_and_a_cancel_rolls_back(
    open_store: OpenStore,
) -> None:
    store = open_store()
    for broker in BROKERS:
        open_store().register_broker(broker)
    for topic in ("moved", "cancelled"):
        store.create_topic(TopicAssignment(topic, uuid.uuid4(), {0: (1, 2)}), {})

    async def main() -> None:
        controller = Controller(store, 1, lambda topic: False)
        await asyncio.to_thread(controller.set_watches)
        controller.start()

        def seen() -> str:
            return f"moved: {state(store, 'moved')}, cancelled: {state(store, 'cancelled')}"

        async def wait(what: str, condition: Callable[[], bool]) -> None:
            await asyncio.to_thread(wait_until, condition, 10, what, seen)

        try:
            for topic in ("moved", "cancelled"):
                await wait(f"{topic} online", lambda t=topic: state(store, t) == (1, (1, 2)))
            epoch = store.get_partition_state("moved", 0).value.leader_epoch  # type: ignore[union-attr]

            results = await controller.alter_reassignments({("moved", 0): (2, 3)})
            assert results[("moved", 0)].error is ErrorCode.NONE
            moving = assignment(store, "moved")
            assert (moving.replicas, moving.adding, moving.removing) == (
                {0: (2, 3, 1)},
                {0: (3,)},
                {0: (1,)},
            )
            started = store.get_partition_state("moved", 0).value  # type: ignore[union-attr]
            assert (started.leader, started.isr, started.leader_epoch) == (1, (1, 2), epoch + 1)
            listed = await controller.list_reassignments(None)
            assert list(listed) == [("moved", 0)]

            join_isr(store, "moved", 3)
            # The leader leaves: the first target replica in sync leads, the ISR shrinks.
            await wait("moved led by 2", lambda: state(store, "moved") == (2, (2, 3)))
            await wait(
                "moved's replicas the target",
                lambda: (
                    assignment(store, "moved")
                    == TopicAssignment("moved", assignment(store, "moved").topic_id, {0: (2, 3)})
                ),
            )
            assert await controller.list_reassignments(None) == {}

            results = await controller.alter_reassignments({("cancelled", 0): (3,)})
            assert results[("cancelled", 0)].error is ErrorCode.NONE
            results = await controller.alter_reassignments({("cancelled", 0): None})
            assert results[("cancelled", 0)].error is ErrorCode.NONE
            back = assignment(store, "cancelled")
            assert (back.replicas, back.adding, back.removing) == ({0: (1, 2)}, {}, {})
            assert state(store, "cancelled") == (1, (1, 2))
            results = await controller.alter_reassignments({("cancelled", 0): None})
            assert results[("cancelled", 0)].error is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS

            refused = await controller.alter_reassignments(
                {("moved", 0): (2, 9), ("moved", 5): (1,), ("gone", 0): (1,)}
            )
            assert {k: r.error for k, r in refused.items()} == {
                ("moved", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                ("moved", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }
            resized = await controller.alter_reassignments(
                {("moved", 0): (1, 2, 3)}, allow_replication_factor_change=False
            )
            assert resized[("moved", 0)].error is ErrorCode.INVALID_REPLICATION_FACTOR
        finally:
            await controller.stop()

    asyncio.run(main())
