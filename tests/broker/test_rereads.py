"""A watch's re-reads apply in the order of the changes, however the reads finish."""

from __future__ import annotations

import asyncio

from herdless.cluster.rereads import Reread


class ZooKeeperStandIn:
    """Reads that finish when the test says, each giving the value current when it began."""

    def __init__(self) -> None:
        self.value = "before"
        self.pending: list[tuple[asyncio.Future[str], str]] = []

    async def read(self) -> str:
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.pending.append((done, self.value))
        return await done

    def finish(self, index: int) -> None:
        done, value = self.pending[index]
        done.set_result(value)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_change_during_a_read_is_read_after_it_and_applied_last() -> None:
    async def scenario() -> list[str]:
        zookeeper, applied = ZooKeeperStandIn(), []
        reread = Reread("the value", zookeeper.read, applied.append)
        reread.changed()
        await settle()
        zookeeper.value = "after"  # a broker registers while the first read is out
        reread.changed()
        reread.changed()  # changes while a read runs make one more read, not one each
        await settle()
        assert len(zookeeper.pending) == 1
        zookeeper.finish(0)
        await settle()
        assert len(zookeeper.pending) == 2
        zookeeper.finish(1)
        await settle()
        assert reread.task is None
        return applied

    assert asyncio.run(scenario()) == ["before", "after"]


def test_a_failed_read_keeps_the_last_view_and_the_next_change_reads_again() -> None:
    async def scenario() -> list[str]:
        applied: list[str] = []
        answers = iter([ConnectionError("zookeeper away"), "back"])

        async def read() -> str:
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

        reread = Reread("the value", read, applied.append, (ConnectionError,))
        reread.changed()
        await settle()
        assert applied == [] and reread.task is None
        reread.changed()
        await settle()
        return applied

    assert asyncio.run(scenario()) == ["back"]
