"""The shard's timers: the next deadline and the order timers fire in, under reschedules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.coordinator import CoordinatorShard, Now, Result, TimerKey, TimerKind

KEYS = [TimerKey(TimerKind.HEARTBEAT, "g", f"m{i}") for i in range(6)]

# (key index, deadline) to schedule, or (key index, None) to cancel; many per key, so
# that replaced deadlines pile up and are compacted away.
ops = st.lists(
    st.tuples(st.integers(0, len(KEYS) - 1), st.none() | st.integers(0, 50)), max_size=400
)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(0, 60))
def test_next_deadline_and_poll_follow_every_reschedule(
    changes: list[tuple[int, int | None]], now: int
) -> None:
    shard = CoordinatorShard()
    fired: list[TimerKey] = []
    order: dict[TimerKey, int] = {}  # when each live timer was last scheduled
    for step, (i, deadline) in enumerate(changes):
        key = KEYS[i]
        if deadline is None:
            shard._cancel(Result(), key)
            order.pop(key, None)
        else:
            shard._schedule(Result(), key, deadline, lambda out, t, key=key: fired.append(key))
            order[key] = step
        scheduled = shard.scheduled()
        assert shard.next_deadline() == min(scheduled.values(), default=None)
    scheduled = shard.scheduled()
    due = sorted((d, order[k], k.member_id) for k, d in scheduled.items() if d <= now)
    shard.poll(Now(wall_ms=0, monotonic_ms=now))
    # Earliest first, ties in the order they were scheduled; the rest still pending.
    assert [k.member_id for k in fired] == [m for _, _, m in due]
    assert shard.scheduled() == {k: d for k, d in scheduled.items() if d > now}
    assert shard.next_deadline() == min(shard.scheduled().values(), default=None)


def test_a_timer_scheduled_while_polling_fires_in_the_same_poll_when_due() -> None:
    shard = CoordinatorShard()
    fired: list[str] = []

    def reschedule(out: Result, now: Now) -> None:
        fired.append("first")
        shard._schedule(out, KEYS[1], now.monotonic_ms, lambda o, t: fired.append("second"))

    shard._schedule(Result(), KEYS[0], 10, reschedule)
    shard.poll(Now(wall_ms=0, monotonic_ms=10))
    assert fired == ["first", "second"]
    assert shard.next_deadline() is None
