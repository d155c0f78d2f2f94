"""A toy second coordinator: named counters on their own internal topic, `__counters`.

It exists to show that the runtime serves more than groups, and to exercise every rule
of it with a state small enough to compare by eye:
- increment(name, by) writes the new value keyed by name; replay sets it;
- get(name) is a read;
- wait_for(name, target) parks until the counter reaches target (another caller's
  increment answers it), so that unload() has parked requests to answer;
- a counter left alone for `idle_reset_ms` is reset (a tombstone), a timer on the same
  CoordinatorTimer the group coordinator uses, keyed by its own keys;
- sum_offloaded(name, numbers) adds a sum computed off the loop, offloaded work.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from herdless.coordinator import Now, OffloadedWork, Reply, Result
from herdless.coordinator.records import Record
from herdless.coordinator.runtime import CoordinatorType, TopicPartition
from herdless.coordinator.timers import CoordinatorTimer
from herdless.protocol.errors import ErrorCode
from tests.coordinator.node import Cluster

COUNTERS_TOPIC = "__counters"
IDLE_RESET_MS = 60_000


@dataclass(frozen=True, slots=True)
class Unloaded:
    """What a parked wait_for gets when the shard stops serving."""

    error_code: ErrorCode = ErrorCode.NOT_COORDINATOR


def record(name: str, value: int | None) -> Record:
    return Record(name.encode(), None if value is None else str(value).encode())


def idle_key(name: str) -> tuple[str, str]:
    """The key of a counter's idle timer: this coordinator's own, not the groups'."""
    return ("idle", name)


@dataclass
class CounterShard:
    idle_reset_ms: int = IDLE_RESET_MS
    values: dict[str, int] = field(default_factory=dict)
    # When each counter is reset if nobody increments it, on the monotonic clock.
    timer: CoordinatorTimer[tuple[str, str]] = field(default_factory=CoordinatorTimer)
    # Parked wait_for calls: name -> [(target, token)].
    waiting: dict[str, list[tuple[int, Hashable]]] = field(default_factory=dict)
    loaded: bool = False

    # -- replay --------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        name = key.decode()
        if value is None:
            self.values.pop(name, None)
        else:
            self.values[name] = int(value)

    # -- operations ----------------------------------------------------------------

    def increment(self, name: str, by: int, token: Hashable, now: Now) -> Result:
        value = self.values.get(name, 0) + by
        self.values[name] = value
        out = Result(records=[record(name, value)], replies=[Reply(token, value)])
        self._touch(name, now, out)
        waiters = self.waiting.pop(name, [])
        for target, waiter in waiters:
            if value >= target:
                out.replies.append(Reply(waiter, value))
            else:
                self.waiting.setdefault(name, []).append((target, waiter))
        return out

    def wait_for(self, name: str, target: int, token: Hashable, now: Now) -> Result:
        value = self.values.get(name, 0)
        if value >= target:
            return Result(replies=[Reply(token, value)])
        self.waiting.setdefault(name, []).append((target, token))
        return Result()

    def sum_offloaded(self, name: str, numbers: Sequence[int], token: Hashable, now: Now) -> Result:
        def complete(total: int | None, later: Now) -> Result:
            if total is None:
                return Result(replies=[Reply(token, None)])
            return self.increment(name, total, token, later)

        numbers = tuple(numbers)
        return Result(offloaded=[OffloadedWork(lambda: sum(numbers), complete)])

    def get(self, name: str) -> int:
        return self.values.get(name, 0)

    # -- lifecycle and timers ------------------------------------------------------

    def on_loaded(self, now: Now) -> Result:
        self.loaded = True
        out = Result()
        for name in self.values:
            self._touch(name, now, out)
        return out

    def unload(self) -> Result:
        out = Result()
        for waiters in self.waiting.values():
            out.replies += [Reply(token, Unloaded()) for _, token in waiters]
        self.waiting.clear()
        self.timer.cancel_all(Result())
        self.loaded = False
        return out

    def poll(self, now: Now) -> Result:
        return self.timer.poll(now)

    def next_deadline(self) -> int | None:
        return self.timer.next_deadline()

    def postpone_timers(self, stalled_ms: int) -> Result:
        return self.timer.postpone(stalled_ms)

    def _touch(self, name: str, now: Now, out: Result) -> None:
        def reset(fired: Result, _: Now) -> None:
            self.values.pop(name, None)
            fired.records.append(record(name, None))

        self.timer.schedule(out, idle_key(name), now.monotonic_ms + self.idle_reset_ms, reset)


def counters(idle_reset_ms: int = IDLE_RESET_MS) -> CoordinatorType[CounterShard]:
    return CoordinatorType(COUNTERS_TOPIC, lambda tp: CounterShard(idle_reset_ms))


def replayed(records: Sequence[Record]) -> dict[str, int]:
    """The counters a fresh shard holds after replaying `records`."""
    shard = CounterShard()
    for r in records:
        shard.replay(r.key, r.value)
    return shard.values


# -- calls through the runtime, as a broker's handlers would make them ---------------

COUNTERS = counters()
TP = TopicPartition(COUNTERS_TOPIC, 0)


def increment(cluster: Cluster, broker: int, name: str, by: int = 1) -> int:
    node, token = cluster.nodes[broker], cluster.token()
    node.take(
        node.runtime.write(
            COUNTERS,
            TP.partition,
            token,
            lambda shard, t, now: shard.increment(name, by, t, now),
            cluster.clock.now(),
        )
    )
    return token


def get(cluster: Cluster, broker: int, name: str) -> int:
    node, token = cluster.nodes[broker], cluster.token()
    node.take(node.runtime.read(COUNTERS, TP.partition, token, lambda shard: shard.get(name)))
    return token


def wait_for(cluster: Cluster, broker: int, name: str, target: int) -> int:
    node, token = cluster.nodes[broker], cluster.token()
    node.take(
        node.runtime.write(
            COUNTERS,
            TP.partition,
            token,
            lambda shard, t, now: shard.wait_for(name, target, t, now),
            cluster.clock.now(),
        )
    )
    return token


def sum_offloaded(cluster: Cluster, broker: int, name: str, numbers: Sequence[int]) -> int:
    node, token = cluster.nodes[broker], cluster.token()
    node.take(
        node.runtime.write(
            COUNTERS,
            TP.partition,
            token,
            lambda shard, t, now: shard.sum_offloaded(name, numbers, t, now),
            cluster.clock.now(),
        )
    )
    return token
