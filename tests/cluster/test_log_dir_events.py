"""The controller and log directory events, against a real ZooKeeper: a broker whose data
directory failed leads nothing and leaves the ISRs, where it is the last member the
partition waits for it, it may lead again once it says the directory writes again or
once it registers anew (a restart), and an event from before its registration counts
for nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from herdless.cluster.controller import Controller
from herdless.cluster.layout import (
    BrokerRegistration,
    LogDirEvent,
    PartitionState,
    TopicAssignment,
)
from herdless.cluster.store import ClusterStore
from tests.cluster.conftest import OpenStore
from tests.support.members import wait_until

BROKER_1 = BrokerRegistration(1, "127.0.0.1", 9092)
BROKER_2 = BrokerRegistration(2, "127.0.0.1", 9093)
TOPIC = "t"


def state(store: ClusterStore, partition: int) -> tuple[int, tuple[int, ...]] | None:
    found = store.get_partition_state(TOPIC, partition)
    return None if found is None else (found.value.leader, found.value.isr)


def test_a_broker_with_a_failed_directory_leads_nothing_until_it_writes_again(
    open_store: OpenStore,
) -> None:
    controller_store, broker_store = open_store(), open_store()
    controller_store.register_broker(BROKER_1)
    # An event from before broker 2 registered is of an earlier life.
    broker_store.propagate_log_dir_event(2, LogDirEvent.FAILURE)
    broker_store.register_broker(BROKER_2)
    controller_store.create_topic(TopicAssignment(TOPIC, uuid.uuid4(), {0: (2, 1), 1: (2, 1)}), {})

    def states() -> str:
        return f"{TOPIC}-0: {state(controller_store, 0)}, {TOPIC}-1: {state(controller_store, 1)}"

    def wait_for(what: str, condition: Callable[[], bool]) -> None:
        wait_until(condition, 10, what, states)

    def scenario() -> None:
        nonlocal broker_store
        for partition in (0, 1):
            wait_for(
                f"{TOPIC}-{partition} led by 2 with both in sync",
                lambda p=partition: state(controller_store, p) == (2, (2, 1)),
            )
        assert controller_store.log_dir_event_names() == []
        # Partition 1's leader alone in its ISR (it shrank it, as a leader does).
        current = broker_store.get_partition_state(TOPIC, 1)
        assert current is not None
        shrunk = PartitionState(2, current.value.leader_epoch, (2,), current.value.controller_epoch)
        broker_store.update_partition_state(TOPIC, 1, shrunk, current.version)

        broker_store.propagate_log_dir_event(2, LogDirEvent.FAILURE)
        wait_for("partition 0 led by 1", lambda: state(controller_store, 0) == (1, (1,)))
        # No other replica in sync: no leader, and the ISR keeps its last member.
        wait_for("partition 1 without a leader", lambda: state(controller_store, 1) == (-1, (2,)))
        wait_for("the event deleted", lambda: controller_store.log_dir_event_names() == [])

        broker_store.propagate_log_dir_event(2, LogDirEvent.ONLINE)
        wait_for("partition 1 led by 2 again", lambda: state(controller_store, 1) == (2, (2,)))
        # Back in partition 0's ISR only once its leader takes it back, caught up.
        assert state(controller_store, 0) == (1, (1,))

        broker_store.propagate_log_dir_event(2, LogDirEvent.FAILURE)
        wait_for("partition 1 without a leader", lambda: state(controller_store, 1) == (-1, (2,)))
        # A restart: its directory is its new life's, whatever the old one said.
        broker_store.close()
        broker_store = open_store()
        broker_store.register_broker(BROKER_2)
        wait_for("partition 1 led by 2", lambda: state(controller_store, 1) == (2, (2,)))

    async def main() -> None:
        controller = Controller(controller_store, 1, lambda topic: False)
        await asyncio.to_thread(controller.set_watches)
        controller.start()
        try:
            await asyncio.to_thread(scenario)
        finally:
            await controller.stop()

    asyncio.run(main())
