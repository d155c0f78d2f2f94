"""A consumer group's history of target assignments, for operators: why each new target
came, and how long each member took to reach it.

A consumer group (KIP-848) has no rebalance to time: each member moves to a new
target assignment on its own. What an operator wants to know instead is why the
target changed (the group epoch bumps since the previous target) and when each
member got there: when its member epoch reached the target's (it has revoked
what it had to) and when it held all of its target (nothing left unreleased).
An entry closes when every member of the target is there, or when a newer
target replaces it first (superseded: who had not arrived never will).

Like the classic groups' history (history.py) it is soft state: rebuilt empty
after a reload, published as `RebalanceRecord`s in the same shape, its epochs in
the generation fields, so `herdless groups history` reads both kinds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.messages import MemberReconciliation, RebalanceRecord

CONSUMER_PROTOCOL = "consumer"


@dataclass(slots=True)
class _Progress:
    epoch_reached_ms: int | None = None
    assigned_ms: int | None = None
    left: bool = False


@dataclass(slots=True)
class _OpenTarget:
    cause: str
    detail: str
    from_epoch: int
    epoch: int
    started_ms: int
    members_before: tuple[str, ...]
    progress: dict[str, _Progress] = field(default_factory=dict)

    def settled(self) -> bool:
        return all(p.left or p.assigned_ms is not None for p in self.progress.values())

    def record(self, ended_ms: int, superseded: bool) -> RebalanceRecord:
        def since_start(ms: int | None) -> int | None:
            return None if ms is None else ms - self.started_ms

        return RebalanceRecord(
            self.cause,
            self.detail,
            self.from_epoch,
            self.epoch,
            self.started_ms,
            ended_ms,
            self.members_before,
            tuple(sorted(self.progress)),
            protocol=CONSUMER_PROTOCOL,
            superseded=superseded,
            reconciliations=tuple(
                MemberReconciliation(
                    member_id,
                    since_start(p.epoch_reached_ms),
                    since_start(p.assigned_ms),
                    p.left,
                )
                for member_id, p in sorted(self.progress.items())
            ),
        )


class TargetAssignmentHistory:
    """One consumer group's: fed by the coordinator as things happen, with the wall clock's
    time (operators read these times beside their own; they are not deadlines).
    Methods that finish an entry return it, for the caller to publish."""

    def __init__(self, size: int) -> None:
        self._entries: deque[RebalanceRecord] = deque(maxlen=size)
        self._causes: list[tuple[str, str]] = []
        self._open: _OpenTarget | None = None
        self._epoch = 0
        self._members: tuple[str, ...] = ()

    def epoch_bumped(self, cause: RebalanceCause, detail: str) -> None:
        """The group epoch moved: the next target comes of it (with any other bumps before)."""
        self._causes.append((cause.value, detail))

    def target_changed(
        self, epoch: int, wall_ms: int, members: dict[str, tuple[int, bool]]
    ) -> RebalanceRecord | None:
        """A new target at `epoch`; `members` is each member's (epoch, holds its target).
        Returns the previous entry if this one supersedes it."""
        superseded = None
        if self._open is not None:
            superseded = self._close(wall_ms, superseded=True)
        causes = self._causes or [("unknown", "")]
        # The first cause says why; the others, if any, came in before the target did.
        cause = causes[0][0]
        details = [d for _, d in causes if d]
        details += [c for c, _ in causes[1:] if c != cause]
        self._open = _OpenTarget(
            cause, "; ".join(details), self._epoch, epoch, wall_ms, self._members
        )
        self._open.progress = {m: _Progress() for m in members}
        self._causes = []
        self._epoch = epoch
        self._members = tuple(sorted(members))
        for member_id, (member_epoch, holds_target) in members.items():
            self._note(member_id, member_epoch, holds_target, wall_ms)
        return superseded

    def member_progressed(
        self, member_id: str, member_epoch: int, holds_target: bool, wall_ms: int
    ) -> RebalanceRecord | None:
        """The member's assignment changed; returns the entry if that completed it."""
        return self._note(member_id, member_epoch, holds_target, wall_ms)

    def member_left(self, member_id: str, wall_ms: int) -> RebalanceRecord | None:
        entry = self._open
        if entry is None or member_id not in entry.progress:
            return None
        entry.progress[member_id].left = True
        return self._close(wall_ms, superseded=False) if entry.settled() else None

    def entries(self) -> tuple[RebalanceRecord, ...]:
        return tuple(self._entries)

    def _note(
        self, member_id: str, member_epoch: int, holds_target: bool, wall_ms: int
    ) -> RebalanceRecord | None:
        entry = self._open
        if entry is None or member_epoch != entry.epoch:
            return None
        progress = entry.progress.get(member_id)
        if progress is None:
            return None
        if progress.epoch_reached_ms is None:
            progress.epoch_reached_ms = wall_ms
        if holds_target and progress.assigned_ms is None:
            progress.assigned_ms = wall_ms
        return self._close(wall_ms, superseded=False) if entry.settled() else None

    def _close(self, wall_ms: int, superseded: bool) -> RebalanceRecord:
        assert self._open is not None
        record = self._open.record(wall_ms, superseded)
        self._entries.append(record)
        self._open = None
        return record
