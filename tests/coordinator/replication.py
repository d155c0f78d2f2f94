"""A fake broker whose `__consumer_offsets` partition is replicated, for leadership moves.

Extends Context with what a cluster adds around a shard:
- a high watermark over `log`, advanced by `replicate` a whole batch at a time (the
  records of one operation are appended as one batch, as the broker does, so a
  follower has all of them or none); a reply goes out only
  once the high watermark has passed every record its operation and all earlier
  ones wrote (result.py), so until then it waits here, not in `replies`;
- a warm standby on a follower, replaying records only once they are committed;
- `move_leadership`: the old shard is unloaded and every request still waiting
  on it gets NOT_COORDINATOR, as the broker answers them; the records above the
  high watermark may be lost; the standby (or a fresh shard replaying the
  whole log) catches up to the log end and takes over; a new standby starts.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from herdless.coordinator import CoordinatorConfig, Reply, Result
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, Context, replay

# What a request gets when the shard it reached stopped leading before answering it
# (the broker answers NOT_COORDINATOR whatever the shard had decided).
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR


class ReplicatedContext(Context):
    def __init__(self, config: CoordinatorConfig = TEST_CONFIG, now_ms: int = 0) -> None:
        self.high_watermark = 0
        # Replies the shard gave, each with the log end they wait for, in order.
        self._held: deque[tuple[int, list[Reply]]] = deque()
        # Requests the active shard has not answered yet (parked JoinGroup, SyncGroup).
        self._parked: set[Hashable] = set()
        # The log's length after each batch: where the high watermark can stop.
        self._batch_ends: list[int] = []
        super().__init__(config, now_ms)
        self.standby = self.new_shard()
        self.standby_offset = 0  # the standby has replayed log[:standby_offset]

    def token(self) -> int:
        token = super().token()
        self._parked.add(token)
        return token

    def apply(self, result: Result) -> Result:
        if result.records:
            self._batch_ends.append(len(self.log) + len(result.records))
        return super().apply(result)

    def answer(self, replies: Iterable[Reply]) -> None:
        replies = list(replies)
        self._parked.difference_update(reply.token for reply in replies)
        self._held.append((len(self.log), replies))
        self._release()

    def _release(self) -> None:
        while self._held and self._held[0][0] <= self.high_watermark:
            super().answer(self._held.popleft()[1])

    def deliver(self, on_reply: dict[Any, Callable[[Any], None]]) -> None:
        """Hand the released replies, in order, to the callbacks of the requests they answer."""
        replies = self.replies
        while replies:
            token = next(iter(replies))
            response = replies.pop(token)
            callback = on_reply.pop(token, None)
            if callback is not None:
                callback(response)

    def replicate(self, n: int) -> None:
        """Followers fetch n more records, and the rest of the batch the last one is in: the
        high watermark moves towards the log end."""
        target = min(self.high_watermark + n, len(self.log))
        if target > self.high_watermark:
            self.high_watermark = self._batch_ends[bisect.bisect_left(self._batch_ends, target)]
        self._release()

    def standby_replays(self, n: int) -> None:
        """The standby applies up to n more committed records."""
        end = min(self.standby_offset + n, self.high_watermark)
        replay(self.standby, self.log[self.standby_offset : end])
        self.standby_offset = end

    def move_leadership(self, *, truncate: bool, warm: bool) -> None:
        """Another replica becomes leader; `truncate`: it never had the uncommitted tail;
        `warm`: it takes over with its standby, else it loads by replaying its whole log."""
        unloaded = self.shard.unload()
        assert not unloaded.records
        for reply in unloaded.replies:
            assert reply.response.error_code is ErrorCode.NOT_COORDINATOR, reply
            self._parked.discard(reply.token)
        assert not self._parked, f"unload() left requests unanswered: {self._parked}"
        self.change_timers(unloaded.timers)
        assert self.timers == {}
        waiting = [reply for _, replies in self._held for reply in replies] + unloaded.replies
        self._held.clear()
        super().answer(Reply(reply.token, NOT_COORDINATOR) for reply in waiting)

        if truncate:
            del self.log[self.high_watermark :]
            del self._batch_ends[bisect.bisect_right(self._batch_ends, self.high_watermark) :]
        if warm:
            shard, start = self.standby, self.standby_offset
        else:
            shard, start = self.new_shard(), 0
        replay(shard, self.log[start:])
        self.shard = shard
        self.standby, self.standby_offset = self.new_shard(), 0
        self.apply(shard.on_loaded(self.clock()))
