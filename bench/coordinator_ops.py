"""CPU per coordinator operation, in process: the runtime and shard alone, no sockets.

Runs heartbeats of a stable 100-member group and 4-partition OffsetCommits
through GroupCoordinator.run() on a real log (what a handler calls), and
prints CPU microseconds per operation: the coordinator's share of what
`bench/groups.py` measures end to end, where decoding, encoding and the
socket come on top.

    python bench/coordinator_ops.py
    python bench/coordinator_ops.py --ops 20000 --profile ops.prof
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herdless.broker.clock import monotonic_ms, wall_ms
from herdless.broker.coordinators.group_coordinator import GroupCoordinator, Operation
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.replica_manager import ReplicaManager
from herdless.coordinator import CoordinatorConfig
from herdless.coordinator import messages as m
from herdless.storage import LogManager

MEMBERS = 100


async def stable_group(groups: GroupCoordinator, group_id: str) -> list[Operation]:
    """A group of MEMBERS members in its first stable generation; one heartbeat each."""

    def join(member_id: str) -> Operation:
        req = m.JoinGroupRequest(
            group_id=group_id,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=60_000,
            member_id=member_id,
            protocol_type="consumer",
            protocols=(m.Protocol("range", b""),),
            api_version=4,
        )
        return lambda shard, token, now: shard.join_group(req, token, now)

    # JoinGroup v4 hands a new member its id first (MEMBER_ID_REQUIRED), then it joins.
    ids = [(await groups.run(group_id, join(""))).member_id for _ in range(MEMBERS)]
    joined = await asyncio.gather(*(groups.run(group_id, join(i)) for i in ids))
    generation, leader = joined[0].generation_id, joined[0].leader

    def sync(member_id: str) -> Operation:
        assignments = tuple((i, b"") for i in ids) if member_id == leader else ()
        req = m.SyncGroupRequest(group_id, generation, member_id, assignments)
        return lambda shard, token, now: shard.sync_group(req, token, now)

    await asyncio.gather(*(groups.run(group_id, sync(i)) for i in ids))

    def heartbeat(member_id: str) -> Operation:
        req = m.HeartbeatRequest(group_id, generation, member_id)
        return lambda shard, token, now: shard.heartbeat(req, token, now)

    return [heartbeat(i) for i in ids]


def commit(group_id: str) -> Operation:
    partitions = tuple(m.CommitPartition(p, 1) for p in range(4))
    req = m.OffsetCommitRequest(group_id, (m.CommitTopic("t", partitions),))
    return lambda shard, token, now: shard.offset_commit(req, token, now)


async def per_op(
    groups: GroupCoordinator,
    group_id: str,
    ops: list[Operation],
    n: int,
    check: Callable[[Any], bool],
) -> float:
    for op in ops:
        assert check(await groups.run(group_id, op))
    started = time.process_time()
    for i in range(n):
        await groups.run(group_id, ops[i % len(ops)])
    return (time.process_time() - started) / n * 1e6


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-coordinator-ops-") as tmp:
        logs = LogManager(Path(tmp))
        logs.open(wall_ms())
        replicas = ReplicaManager(logs, Durability(monotonic_ms), wall_ms)
        groups = GroupCoordinator(
            logs, replicas, CoordinatorConfig(initial_rebalance_delay_ms=0), num_partitions=50
        )
        groups.start()
        await groups.wait_loaded()
        heartbeats = await stable_group(groups, "g")
        commits = [commit("c")]
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        hb = await per_op(groups, "g", heartbeats, args.ops, lambda r: r.error_code == 0)
        oc = await per_op(groups, "c", commits, args.ops, lambda r: r.topics)
        if profiler:
            profiler.disable()
            profiler.dump_stats(args.profile)
        print(f"heartbeat: {hb:.1f} us CPU; 4-partition OffsetCommit: {oc:.1f} us CPU")
        groups.close()
        logs.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=50_000, help="operations of each kind")
    parser.add_argument("--profile", type=Path, help="write a cProfile of both loops here")
    asyncio.run(main(parser.parse_args()))
