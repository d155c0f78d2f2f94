"""What the runtime hands back from each input: everything the broker must now do.

The runtime does no I/O and keeps no clock, so every consequence of an input comes
back as data in one Output, in the order it must be acted on: send `replies` and
`errors`, arm or cancel the timer of each partition in `deadlines`, keep replaying
the partitions in `replay`, run the `offloads` off the event loop, publish the
`rebalances`, and log `loaded` and `reloads`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from herdless.coordinator.messages import RebalanceRecord
from herdless.coordinator.result import OffloadedWork, Reply
from herdless.coordinator.runtime.writer import TopicPartition
from herdless.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Offload:
    """Offloaded work of one shard's state: run `work.run()` off the loop, then hand its
    value (None if it raised) to `CoordinatorRuntime.offloaded_done` with this Offload.
    The runtime drops the value if the shard's state was rebuilt or left meanwhile: the
    new state asks again for what it still needs."""

    tp: TopicPartition
    incarnation: int
    work: OffloadedWork


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """A partition's shard finished loading and serves from now on (Kafka's
    LoadSummary, less the times, which the broker keeps)."""

    tp: TopicPartition
    # Records replayed into this shard's state, and how many of them since it was told
    # to lead (fewer than all for a warm standby promoted).
    records: int
    records_since_leader: int


@dataclass(frozen=True, slots=True)
class Reload:
    """A serving shard's state ran ahead of its log and is rebuilt by replay."""

    tp: TopicPartition
    reason: str


class Output:
    """Everything but `replies` starts as a shared empty tuple and becomes a list at its
    first item (the add_* methods): nearly every Output carries replies alone, and the
    seven empty lists it built otherwise, with a dataclass's default factories before
    that, cost more than the rest of the runtime's share of an OffsetCommit
    (bench/broker_instructions.py). Read the fields; add through the methods."""

    __slots__ = (
        "replies",
        "errors",
        "deadlines",
        "replay",
        "offloads",
        "rebalances",
        "loaded",
        "reloads",
    )

    def __init__(self) -> None:
        # Responses released, in order: each goes to the caller that gave its token.
        self.replies: list[Reply] = []
        # Callers answered with an error instead (Kafka's codes: NOT_COORDINATOR,
        # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE).
        self.errors: Sequence[tuple[Hashable, ErrorCode]] = ()
        # Partitions whose timer moved: call poll(tp, now) at this monotonic time; None:
        # no timer. A partition not named keeps the timer it had.
        self.deadlines: Mapping[TopicPartition, int | None] = _NO_DEADLINES
        # Partitions with replay still to do: call replay(tp, now) until one is named no
        # more.
        self.replay: Sequence[TopicPartition] = ()
        self.offloads: Sequence[Offload] = ()
        # The shards' side outputs, passed through as they gave them: completed
        # rebalances for the history topic, once their operation's records were appended.
        self.rebalances: Sequence[tuple[TopicPartition, list[tuple[str, RebalanceRecord]]]] = ()
        self.loaded: Sequence[LoadSummary] = ()
        self.reloads: Sequence[Reload] = ()

    def _append(self, field: str, item: object) -> None:
        items = getattr(self, field)
        if items:
            items.append(item)  # a list once not empty
        else:
            setattr(self, field, [item])

    def add_error(self, token: Hashable, error: ErrorCode) -> None:
        self._append("errors", (token, error))

    def add_replay(self, tp: TopicPartition) -> None:
        self._append("replay", tp)

    def add_offload(self, offload: Offload) -> None:
        self._append("offloads", offload)

    def add_rebalances(
        self, tp: TopicPartition, rebalances: list[tuple[str, RebalanceRecord]]
    ) -> None:
        self._append("rebalances", (tp, rebalances))

    def add_loaded(self, summary: LoadSummary) -> None:
        self._append("loaded", summary)

    def add_reload(self, reload: Reload) -> None:
        self._append("reloads", reload)

    def set_deadline(self, tp: TopicPartition, deadline: int | None) -> None:
        if self.deadlines:
            self.deadlines[tp] = deadline  # type: ignore[index]  # a dict once not empty
        else:
            self.deadlines = {tp: deadline}


_NO_DEADLINES: Mapping[TopicPartition, int | None] = MappingProxyType({})
