"""Merging state batches (Kafka's PersisterStateBatchCombiner): what a write changed laid
over what was known, as one sorted run of offsets with no overlap.

A later batch wins over an earlier one wherever they overlap, whether the earlier came
from the stored state or from the same write; offsets below the start offset are gone
(they left the in-flight window); neighbours with the same delivery state and count
become one batch, so the state stays as small as the window's distinct runs.
"""

from __future__ import annotations

from collections.abc import Iterable

from herdless.coordinator.share_state.state import StateBatch


def merge_batches(
    current: Iterable[StateBatch], changed: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    runs: list[StateBatch] = []
    for batch in (*current, *changed):
        if batch.last_offset < batch.first_offset:
            continue
        runs = _overlay(runs, batch)
    pruned = [_from(batch, start_offset) for batch in runs if batch.last_offset >= start_offset]
    return tuple(_coalesce(pruned))


def _overlay(runs: list[StateBatch], new: StateBatch) -> list[StateBatch]:
    """`runs` (sorted, disjoint) with `new` laid over them."""
    out: list[StateBatch] = []
    placed = False
    for run in runs:
        if run.last_offset < new.first_offset:
            out.append(run)
            continue
        if run.first_offset > new.last_offset:
            if not placed:
                out.append(new)
                placed = True
            out.append(run)
            continue
        # Overlapping: keep what sticks out on either side.
        if run.first_offset < new.first_offset:
            out.append(_span(run, run.first_offset, new.first_offset - 1))
        if not placed:
            out.append(new)
            placed = True
        if run.last_offset > new.last_offset:
            out.append(_span(run, new.last_offset + 1, run.last_offset))
    if not placed:
        out.append(new)
    return out


def _from(batch: StateBatch, start_offset: int) -> StateBatch:
    if batch.first_offset >= start_offset:
        return batch
    return _span(batch, start_offset, batch.last_offset)


def _span(batch: StateBatch, first: int, last: int) -> StateBatch:
    return StateBatch(first, last, batch.delivery_state, batch.delivery_count)


def _coalesce(runs: list[StateBatch]) -> list[StateBatch]:
    out: list[StateBatch] = []
    for run in runs:
        if out:
            last = out[-1]
            if (
                last.last_offset + 1 == run.first_offset
                and last.delivery_state == run.delivery_state
                and last.delivery_count == run.delivery_count
            ):
                out[-1] = _span(last, last.first_offset, run.last_offset)
                continue
        out.append(run)
    return out
