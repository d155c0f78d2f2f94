"""The leader-epoch cache, case by case as Kafka's LeaderEpochFileCacheTest has it."""

from __future__ import annotations

from pathlib import Path

import pytest

from herdless.storage.leader_epochs import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_with(tmp_path: Path, *assigned: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in assigned:
        cache.assign(epoch, start)
    return cache


def reloaded(path: Path) -> list[EpochEntry]:
    """The entries as a new cache reads them back from the checkpoint."""
    loaded = LeaderEpochCache.load(path)
    assert loaded is not None
    return loaded.entries


def entries(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return [EpochEntry(epoch, start) for epoch, start in pairs]


# (assignments in order, entries kept)
ASSIGNMENTS = [
    pytest.param([(2, 10)], [(2, 10)], id="first"),
    pytest.param([(2, 9), (2, 10)], [(2, 9)], id="an epoch keeps its first start offset"),
    pytest.param([(2, 6), (2, 7)], [(2, 6)], id="same epoch later offset ignored"),
    pytest.param([(2, 9), (3, 9)], [(3, 9)], id="new epoch at the same offset replaces"),
    pytest.param([(2, 6), (3, 5)], [(3, 5)], id="offsets going backwards drop the newer"),
    pytest.param([(1, 5), (2, 6), (1, 7)], [(1, 7)], id="epochs going backwards drop the newer"),
    pytest.param(
        [(5, 11), (6, 12), (7, 13), (7, 12)],
        [(5, 11), (7, 12)],
        id="matching epoch at an earlier offset truncates",
    ),
    pytest.param(
        [(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (2, 6), (2, 7)],
        [(0, 0), (1, 3), (2, 6)],
        id="a follower receiving many batches",
    ),
]


@pytest.mark.parametrize(("assigned", "kept"), ASSIGNMENTS)
def test_assign(
    tmp_path: Path, assigned: list[tuple[int, int]], kept: list[tuple[int, int]]
) -> None:
    cache = cache_with(tmp_path, *assigned)
    assert cache.entries == entries(*kept)
    assert cache.latest_epoch == kept[-1][0]
    assert reloaded(cache.path) == entries(*kept)


def test_assign_refuses_undefined_values(tmp_path: Path) -> None:
    cache = cache_with(tmp_path)
    for epoch, start in ((-1, 0), (0, -1)):
        with pytest.raises(ValueError):
            cache.assign(epoch, start)
    assert cache.latest_epoch is None and cache.entries == []


# (assignments, requested epoch, log end offset, answer)
END_OFFSETS = [
    pytest.param([], 0, 0, UNDEFINED, id="empty cache"),
    pytest.param([], UNDEFINED_EPOCH, 73, UNDEFINED, id="undefined epoch, empty cache"),
    pytest.param([(2, 11), (3, 12)], UNDEFINED_EPOCH, 0, UNDEFINED, id="undefined epoch"),
    pytest.param([(2, 10)], 2, 11, (2, 11), id="latest epoch ends at the log end"),
    pytest.param([(2, 11), (2, 12)], 2, 14, (2, 14), id="latest epoch assigned twice"),
    pytest.param([(2, 6)], 2, 7, (2, 7), id="epochs need not start at zero"),
    pytest.param([(5, 11), (6, 12), (7, 13)], 4, 0, (4, 11), id="below the first epoch"),
    pytest.param(
        [(1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)],
        2,
        17,
        (2, 15),
        id="an older epoch ends where the next starts",
    ),
    pytest.param([(0, 10), (2, 13), (4, 17)], 1, 0, (0, 13), id="unknown epoch between two"),
    pytest.param([(0, 10), (2, 13), (4, 17)], 2, 0, (2, 17), id="known older epoch"),
    pytest.param([(0, 10), (2, 13), (4, 17)], 3, 0, (2, 17), id="unknown epoch below latest"),
    pytest.param([(2, 100)], 3, 100, UNDEFINED, id="above the latest epoch"),
    pytest.param([(5, 11), (6, 12), (7, 13), (7, 12)], 5, 0, (5, 12), id="after truncation 5"),
    pytest.param([(5, 11), (6, 12), (7, 13), (7, 12)], 6, 0, (5, 12), id="after truncation 6"),
    pytest.param([(1, 5), (2, 6), (1, 7)], 1, 8, (1, 8), id="epoch 1 is latest again"),
    pytest.param([(1, 5), (2, 6), (1, 7)], 2, 8, UNDEFINED, id="epoch 2 was dropped"),
    pytest.param([(0, 0), (1, 0)], 0, 0, (0, 0), id="empty epoch 0 before epoch 1"),
]


@pytest.mark.parametrize(("assigned", "requested", "log_end", "answer"), END_OFFSETS)
def test_end_offset_for(
    tmp_path: Path,
    assigned: list[tuple[int, int]],
    requested: int,
    log_end: int,
    answer: tuple[int, int],
) -> None:
    assert cache_with(tmp_path, *assigned).end_offset_for(requested, log_end) == answer


def test_epochs_tracked_as_leaders_change(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 0))
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


THREE = [(2, 6), (3, 8), (4, 11)]

# (truncation, offset, entries kept)
TRUNCATIONS = [
    pytest.param("end", 8, [(2, 6)], id="end on an epoch boundary"),
    pytest.param("end", 9, [(2, 6), (3, 8)], id="end between boundaries"),
    pytest.param("end", 12, THREE, id="end past the latest start"),
    pytest.param("end", UNDEFINED_EPOCH_OFFSET, THREE, id="end undefined"),
    pytest.param("start", 8, [(3, 8), (4, 11)], id="start on an epoch boundary"),
    pytest.param("start", 9, [(3, 9), (4, 11)], id="start between boundaries"),
    pytest.param("start", 1, THREE, id="start before the first epoch"),
    pytest.param("start", 6, THREE, id="start at the first epoch"),
    pytest.param("start", 11, [(4, 11)], id="start at the latest epoch"),
    pytest.param("start", 15, [(4, 15)], id="start past the latest epoch"),
    pytest.param("start", UNDEFINED_EPOCH_OFFSET, THREE, id="start undefined"),
]


@pytest.mark.parametrize(("side", "offset", "kept"), TRUNCATIONS)
def test_truncation(tmp_path: Path, side: str, offset: int, kept: list[tuple[int, int]]) -> None:
    cache = cache_with(tmp_path, *THREE)
    changed = (cache.truncate_from_end if side == "end" else cache.truncate_from_start)(offset)
    assert cache.entries == entries(*kept)
    assert changed == (kept != THREE)
    assert reloaded(cache.path) == entries(*kept)


def test_truncation_from_start_keeps_the_epoch_the_offset_falls_in(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 7), (2, 10))
    cache.truncate_from_start(5)
    assert cache.entries == entries((0, 5), (1, 7), (2, 10))


def test_truncating_an_empty_cache(tmp_path: Path) -> None:
    cache = cache_with(tmp_path)
    assert not cache.truncate_from_start(7) and not cache.truncate_from_end(7)
    assert cache.entries == []


def test_truncation_then_latest_epoch(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 10), (4, 15), (10, 20))
    cache.truncate_from_end(18)
    assert cache.latest_epoch == 4
    cache.truncate_from_end(11)
    assert cache.latest_epoch == 2


def test_epoch_for_offset(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 10), (1, 20), (5, 30))
    found = {offset: cache.epoch_for_offset(offset) for offset in (5, 20, 25, 30, 50)}
    assert found == {5: None, 20: 1, 25: 1, 30: 5, 50: 5}


def test_clear(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, *THREE)
    cache.clear()
    assert cache.entries == [] and cache.latest_epoch is None
    assert reloaded(cache.path) == []


def test_checkpoint_is_in_kafkas_format(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert cache.path.read_text() == "0\n1\n3 8\n"
    # Kafka splits entries on any whitespace.
    cache.path.write_text("0\n2\n0  1\n1\t2\n")
    assert reloaded(cache.path) == entries((0, 1), (1, 2))


@pytest.mark.parametrize(
    "content",
    [
        "1\n1\n0 0\n",  # unknown version
        "0\n2\n0 0\n",  # fewer entries than counted
        "0\n1\n0 0 0\n",  # three fields
        "0\n1\nzero 0\n",
        "0\n2\n3 10\n2 20\n",  # epochs go backwards
        "0\n2\n2 20\n3 10\n",  # start offsets go backwards
        "0\n1\n-1 0\n",
        "\xff",
    ],
)
def test_a_damaged_checkpoint_loads_as_none(tmp_path: Path, content: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(content.encode("latin-1"))
    assert LeaderEpochCache.load(path) is None
    assert LeaderEpochCache.load(tmp_path / "absent") is None
