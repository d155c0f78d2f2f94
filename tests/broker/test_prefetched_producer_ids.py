"""The transaction coordinator's producer ids: handed out at once from a reserved block,
the next block reserved in the background, a retriable refusal when none is at hand."""

from __future__ import annotations

import asyncio

import pytest

from herdless.broker.producer_ids import PrefetchedProducerIds, ProducerIdsNotReady


class Blocks:
    """A block source whose reservations complete only when the test says so."""

    def __init__(self) -> None:
        self.end = 0
        self.asked = 0
        self.gate = asyncio.Event()
        self.fail = False

    async def reserve(self, size: int) -> tuple[int, int]:
        self.asked += 1
        await self.gate.wait()
        if self.fail:
            raise OSError("disk gone")
        start, self.end = self.end, self.end + size
        return start, self.end


def test_no_id_before_the_first_block_then_ids_in_order() -> None:
    async def run() -> None:
        blocks = Blocks()
        ids = PrefetchedProducerIds(blocks.reserve, block_size=10)
        with pytest.raises(ProducerIdsNotReady):
            ids()
        blocks.gate.set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert [ids() for _ in range(5)] == [0, 1, 2, 3, 4]
        assert blocks.asked == 1
        await ids.close()

    asyncio.run(run())


def test_the_next_block_is_reserved_before_the_current_runs_out() -> None:
    async def run() -> None:
        blocks = Blocks()
        blocks.gate.set()
        ids = PrefetchedProducerIds(blocks.reserve, block_size=10)
        ids.prefetch()
        await asyncio.sleep(0)
        handed = [ids() for _ in range(9)]
        # Nine of ten used: the next block is asked for while one id is left.
        await asyncio.sleep(0)
        assert blocks.asked == 2
        handed += [ids() for _ in range(11)]
        assert handed == list(range(20))
        assert len(set(handed)) == len(handed)
        await ids.close()

    asyncio.run(run())


def test_a_failed_reservation_is_reported_and_asked_again() -> None:
    async def run() -> None:
        blocks = Blocks()
        blocks.fail = True
        blocks.gate.set()
        errors: list[Exception] = []
        ids = PrefetchedProducerIds(blocks.reserve, errors.append, block_size=10)
        with pytest.raises(ProducerIdsNotReady):
            ids()
        await asyncio.sleep(0)
        assert [str(e) for e in errors] == ["disk gone"]
        blocks.fail = False
        with pytest.raises(ProducerIdsNotReady):
            ids()
        await asyncio.sleep(0)
        assert ids() == 0
        assert blocks.asked == 2
        await ids.close()

    asyncio.run(run())
