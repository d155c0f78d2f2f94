"""Offset load of the group coordinator, in process: the replay path alone, no sockets.

Writes `__consumer_offsets` the way the broker does (each group's OffsetCommit
becomes one batch of one record per partition, built by the shard itself),
then times the coordinator runtime's replay over every partition, the path a restarted
broker and a warm standby take. `bench/groups.py --only load` measures the same
through a real broker restart; this isolates the coordinator's part and can run
under a profiler:

    python bench/coordinator_load.py                      # 1,000,000 records
    python bench/coordinator_load.py --records 200000 --profile load.prof
    python bench/coordinator_load.py --rewrites 4         # each offset committed 4 times
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import statistics
import tempfile
import time
from pathlib import Path

from herdless.broker.clock import monotonic_ms, now, wall_ms
from herdless.broker.coordinators.coordinator_writer import ReplicaWriter
from herdless.broker.coordinators.group_coordinator import OFFSETS_TOPIC
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.replica_manager import ReplicaManager
from herdless.coordinator import CoordinatorConfig, CoordinatorShard, Now, partition_for
from herdless.coordinator.messages import CommitPartition, CommitTopic, OffsetCommitRequest
from herdless.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorType,
    ReplicaRole,
    TopicPartition,
)
from herdless.protocol.records import build_batch, split_batches
from herdless.storage import LogManager

TOPIC = "bench-offsets"
NOW_MS = 1_700_000_000_000


def write_offsets(
    logs: LogManager, partitions: int, groups: int, per_group: int, rewrites: int
) -> int:
    topic = logs.create_topic(OFFSETS_TOPIC, partitions, {"cleanup.policy": "compact"})
    writer = CoordinatorShard()
    written = 0
    for round_ in range(rewrites):
        for i in range(groups):
            group = f"load-{i}"
            commit = tuple(CommitPartition(p, 1000 * round_ + p) for p in range(per_group))
            req = OffsetCommitRequest(group, (CommitTopic(TOPIC, commit),))
            result = writer.offset_commit(req, None, Now(NOW_MS + round_, 0))
            batch = build_batch([(r.key, r.value) for r in result.records], NOW_MS)
            log = topic.partitions[partition_for(group, partitions)]
            log.append(split_batches(memoryview(batch), len(batch)), NOW_MS)
            written += len(result.records)
    return written


def replay_all(logs: LogManager, partitions: int) -> list[CoordinatorShard]:
    """Load every partition as a broker does on start, a bounded read per step."""
    kind = CoordinatorType(OFFSETS_TOPIC, lambda tp: CoordinatorShard(CoordinatorConfig()))
    replicas = ReplicaManager(logs, Durability(monotonic_ms), wall_ms)
    runtime = CoordinatorRuntime(ReplicaWriter(logs, replicas), [kind])
    shards = []
    for p in range(partitions):
        tp = TopicPartition(OFFSETS_TOPIC, p)
        out = runtime.on_leadership(tp, ReplicaRole.LEADER, now())
        while tp in out.replay:
            out = runtime.replay(tp, now())
        shard = runtime.shard(kind, p)
        assert shard is not None
        shards.append(shard)
    return shards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="distinct offsets")
    parser.add_argument("--per-group", type=int, default=200, help="partitions per group")
    parser.add_argument("--partitions", type=int, default=50, help="__consumer_offsets partitions")
    parser.add_argument("--rewrites", type=int, default=1, help="commits of each offset")
    parser.add_argument("--runs", type=int, default=3, help="timed replays")
    parser.add_argument("--profile", type=Path, help="write a cProfile of one replay here")
    args = parser.parse_args()
    groups = args.records // args.per_group
    with tempfile.TemporaryDirectory(prefix="bench-coordinator-load-") as tmp:
        logs = LogManager(Path(tmp))
        logs.open(NOW_MS)
        started = time.perf_counter()
        written = write_offsets(logs, args.partitions, groups, args.per_group, args.rewrites)
        print(f"wrote {written:,} records in {time.perf_counter() - started:.1f}s")
        times = []
        cpu = []
        for _ in range(args.runs):
            gc.collect()
            started, cpu_started = time.perf_counter(), time.process_time()
            shards = replay_all(logs, args.partitions)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
            offsets = sum(
                len(list(s.offsets.entries(g))) for s in shards for g in s.offsets.group_ids()
            )
            assert offsets == groups * args.per_group, offsets
            del shards
        print(
            f"replayed {written:,} records: best {min(times):.3f}s, median "
            f"{statistics.median(times):.3f}s ({written / min(times):,.0f} records/s); "
            f"runs {' '.join(f'{t:.3f}' for t in times)}; CPU {' '.join(f'{t:.3f}' for t in cpu)}"
        )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            replay_all(logs, args.partitions)
            profiler.disable()
            profiler.dump_stats(args.profile)
            print(f"profile in {args.profile}")
        logs.close()


if __name__ == "__main__":
    main()
