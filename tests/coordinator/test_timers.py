"""The shard's timer table (timers.py): the next deadline and the order timers fire in,
under reschedules; and the timer changes it writes for the broker."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.coordinator import (
    CancelTimer,
    CoordinatorShard,
    Now,
    Result,
    ScheduleTimer,
    TimerKey,
    TimerKind,
)
from herdless.coordinator.timers import CoordinatorTimer

KEYS = [TimerKey(TimerKind.HEARTBEAT, "g", f"m{i}") for i in range(6)]

# (key index, deadline) to schedule, or (key index, None) to cancel; many per key, so
# that replaced deadlines pile up and are compacted away.
ops = st.lists(
    st.tuples(st.integers(0, len(KEYS) - 1), st.none() | st.integers(0, 50)), max_size=400
)


def at(monotonic_ms: int) -> Now:
    return Now(wall_ms=0, monotonic_ms=monotonic_ms)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(0, 60))
def test_next_deadline_and_poll_follow_every_reschedule(
    changes: list[tuple[int, int | None]], now: int
) -> None:
    timer = CoordinatorTimer()
    fired: list[TimerKey] = []
    order: dict[TimerKey, int] = {}  # when each live timer was last scheduled
    for step, (i, deadline) in enumerate(changes):
        key = KEYS[i]
        if deadline is None:
            timer.cancel(Result(), key)
            order.pop(key, None)
        else:
            timer.schedule(Result(), key, deadline, lambda out, t, key=key: fired.append(key))
            order[key] = step
        scheduled = timer.scheduled()
        assert timer.next_deadline() == min(scheduled.values(), default=None)
    scheduled = timer.scheduled()
    due = sorted((d, order[k], k.member_id) for k, d in scheduled.items() if d <= now)
    timer.poll(at(now))
    # Earliest first, ties in the order they were scheduled; the rest still pending.
    assert [k.member_id for k in fired] == [m for _, _, m in due]
    assert timer.scheduled() == {k: d for k, d in scheduled.items() if d > now}
    assert timer.next_deadline() == min(timer.scheduled().values(), default=None)


def test_a_timer_scheduled_while_polling_fires_in_the_same_poll_when_due() -> None:
    timer = CoordinatorTimer()
    fired: list[str] = []

    def reschedule(out: Result, now: Now) -> None:
        fired.append("first")
        timer.schedule(out, KEYS[1], now.monotonic_ms, lambda o, t: fired.append("second"))

    timer.schedule(Result(), KEYS[0], 10, reschedule)
    timer.poll(at(10))
    assert fired == ["first", "second"]
    assert timer.next_deadline() is None


def test_every_change_is_written_for_the_broker_and_a_cancel_only_when_one_ran() -> None:
    timer = CoordinatorTimer()
    out = Result()
    timer.schedule(out, KEYS[0], 30, lambda o, t: None)
    timer.schedule(out, KEYS[0], 40, lambda o, t: None)  # later: moved in place
    timer.schedule(out, KEYS[0], 20, lambda o, t: None)  # earlier: a new entry
    timer.cancel(out, KEYS[0])
    timer.cancel(out, KEYS[0])  # nothing left to cancel: nothing written
    assert out.timers == [
        ScheduleTimer(KEYS[0], 30),
        ScheduleTimer(KEYS[0], 40),
        ScheduleTimer(KEYS[0], 20),
        CancelTimer(KEYS[0]),
    ]
    assert not timer.is_scheduled(KEYS[0])
    assert timer.next_deadline() is None


def test_fire_runs_only_a_timer_that_is_due_and_runs_it_once() -> None:
    timer = CoordinatorTimer()
    fired: list[int] = []
    timer.schedule(Result(), KEYS[0], 10, lambda o, now: fired.append(now.monotonic_ms))
    timer.schedule(Result(), KEYS[0], 25, lambda o, now: fired.append(now.monotonic_ms))
    # The broker armed the key for 10, but it moved to 25 since.
    assert timer.fire(KEYS[0], at(10)) == Result()
    assert fired == [] and timer.is_scheduled(KEYS[0])
    timer.fire(KEYS[0], at(25))
    timer.fire(KEYS[0], at(30))
    assert fired == [25]
    assert timer.scheduled() == {}


def test_what_a_callback_writes_goes_into_the_poll_result() -> None:
    timer = CoordinatorTimer()

    def expire(out: Result, now: Now) -> None:
        timer.schedule(out, KEYS[2], now.monotonic_ms + 100, lambda o, t: None)
        timer.cancel(out, KEYS[1])

    timer.schedule(Result(), KEYS[0], 5, expire)
    timer.schedule(Result(), KEYS[1], 50, lambda o, t: None)
    result = timer.poll(at(7))
    assert result.timers == [ScheduleTimer(KEYS[2], 107), CancelTimer(KEYS[1])]
    assert timer.scheduled() == {KEYS[2]: 107}


def test_postpone_moves_every_deadline_and_says_so() -> None:
    timer = CoordinatorTimer()
    fired: list[TimerKey] = []
    for i, deadline in enumerate((30, 10, 20)):
        key = KEYS[i]
        timer.schedule(Result(), key, deadline, lambda o, t, key=key: fired.append(key))
    result = timer.postpone(1_000)
    assert result.timers == [
        ScheduleTimer(KEYS[0], 1_030),
        ScheduleTimer(KEYS[1], 1_010),
        ScheduleTimer(KEYS[2], 1_020),
    ]
    assert timer.next_deadline() == 1_010
    timer.poll(at(1_000))
    assert fired == []
    timer.poll(at(1_030))
    assert fired == [KEYS[1], KEYS[2], KEYS[0]]


def test_cancel_all_cancels_in_the_order_first_scheduled() -> None:
    timer = CoordinatorTimer()
    for key, deadline in ((KEYS[3], 5), (KEYS[1], 1), (KEYS[4], 9)):
        timer.schedule(Result(), key, deadline, lambda o, t: None)
    out = Result()
    timer.cancel_all(out)
    assert out.timers == [CancelTimer(KEYS[3]), CancelTimer(KEYS[1]), CancelTimer(KEYS[4])]
    assert timer.next_deadline() is None and timer.poll(at(100)) == Result()


def test_the_shard_keeps_every_timer_in_its_one_table() -> None:
    shard = CoordinatorShard()
    loaded = shard.on_loaded(at(0))
    # The offset retention check is the shard's own; groups add theirs to the same table.
    assert (
        shard.scheduled()
        == shard.timer.scheduled()
        == {TimerKey(TimerKind.RETENTION): (shard.config.offsets_retention_check_interval_ms)}
    )
    assert loaded.timers == [
        ScheduleTimer(
            TimerKey(TimerKind.RETENTION), shard.config.offsets_retention_check_interval_ms
        )
    ]
    assert shard.unload().timers == [CancelTimer(TimerKey(TimerKind.RETENTION))]
