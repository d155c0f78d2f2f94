"""Marshal consumers in separate processes against a real broker."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from herdless.marshal.rationalizer import ClaimKey
from tests.marshal.cluster import (
    INTERVAL,
    Runner,
    create_topic,
    owners,
    processed,
    state,
    stop_all,
    wait_for,
)
from tests.support.broker import BrokerProcess

# Randomized at-most-once runs in the suite; MARSHAL_RUNS=100 for a long soak.
# MARSHAL_SEED=<seed> replays a printed run's choices (batch size, when to kill
# whom, who comes back as whom); thread and broker timing still vary.
AMO_RUNS = int(os.environ.get("MARSHAL_RUNS", "5"))
SEED = os.environ.get("MARSHAL_SEED")


def _split(bootstrap: str, group: str, clients: set[str], per_client: int):
    """The state once every partition is held by exactly one of clients, per_client each."""

    def probe():
        current = state(bootstrap)
        held = owners(current, group)
        counts = {c: sum(1 for o in held.values() if o == c) for c in clients}
        if (
            len(held) == 12
            and set(held.values()) == clients
            and set(counts.values()) == {per_client}
        ):
            return current
        return None

    return wait_for(f"{group} split {per_client} each over {sorted(clients)}", probe, 60)


def test_three_consumers_share_twelve_partitions_and_take_over_from_a_killed_one(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    records = 2400
    create_topic(broker.bootstrap, "alo", 12, records)
    runners = {
        c: Runner(broker.bootstrap, tmp_path, "alo-g", "alo", c, delay_ms=4, max_batch=10)
        for c in "abc"
    }
    try:
        _split(broker.bootstrap, "alo-g", {"a", "b", "c"}, 4)
        runners["c"].kill()
        # c's last word, as the log has it: nobody may claim before it is stale.
        after_kill = state(broker.bootstrap)
        lost = {k: cl for k, cl in after_kill.group_claims("alo-g").items() if cl.owner == "c"}
        assert len(lost) == 4
        final = _split(broker.bootstrap, "alo-g", {"a", "b"}, 6)
        for key, old in lost.items():
            new = final.claims[key]
            assert new.claimed_at_ms - old.heartbeat_at_ms > 2 * INTERVAL * 1000
            assert new.resume_after(at_most_once=False) >= old.last_offset

        # At least once: every record processed, whoever died when.
        wanted = {(i % 12, i // 12) for i in range(records)}
        wait_for(
            "every record processed",
            lambda: wanted <= set(processed(tmp_path, "alo-g")),
            90,
        )
    finally:
        survivors = {c: r for c, r in runners.items() if c != "c"}
        codes = dict(zip(survivors, stop_all(list(survivors.values())), strict=True))
    assert codes == {"a": 0, "b": 0}, runners["a"].log()
    # A graceful close releases every claim.
    assert set(owners(state(broker.bootstrap), "alo-g").values()) == {None}


def test_at_most_once_never_processes_a_record_twice_across_random_kills(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    for run in range(AMO_RUNS):
        seed = int(SEED) if SEED else random.randrange(2**32)
        print(f"at-most-once run {run}: seed {seed}")
        _amo_run(broker.bootstrap, tmp_path, f"amo{run}", random.Random(seed), seed)


def _amo_run(bootstrap: str, workdir: Path, name: str, rnd: random.Random, seed: int) -> None:
    # About 3 s of processing per consumer, so that the kills land mid-work.
    partitions, records = 6, 900
    create_topic(bootstrap, name, partitions, records)
    opts = {"mode": "at-most-once", "delay_ms": 10, "max_batch": rnd.choice([5, 10, 20])}
    runners = [Runner(bootstrap, workdir, name, name, c, **opts) for c in "abc"]
    try:
        for kill in range(2):
            time.sleep(rnd.uniform(0.3, 1.5))
            victim = rnd.choice([r for r in runners if r.process.poll() is None])
            victim.kill()
            # Half the time it comes back under its own id and resumes its claims.
            client = victim.client_id if rnd.random() < 0.5 else f"{victim.client_id}{kill}"
            runners.append(Runner(bootstrap, workdir, name, name, client, **opts))

        def all_claimed() -> bool:
            claims = state(bootstrap).group_claims(name)
            last = records // partitions - 1
            return len(claims) == partitions and all(
                max(c.claimed_through, c.last_offset) == last for c in claims.values()
            )

        wait_for(f"{name} (seed {seed}) claims every record", all_claimed, 60)
        time.sleep(0.5)  # the last batches get processed
    finally:
        stop_all([r for r in runners if r.process.poll() is None])
    counts = processed(workdir, name)
    print(f"  {len(counts)} of {records} processed, {len(runners)} processes")
    twice = sorted(k for k, n in counts.items() if n > 1)
    assert not twice, f"seed {seed}: processed twice: {twice[:10]}"
    # Some loss is allowed (the batches in hand when killed), but not much.
    assert len(counts) >= records // 2, f"seed {seed}: only {len(counts)} processed"


def test_many_consumers_race_for_one_partition_and_exactly_one_wins(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from tests.marshal.cluster import COORDINATION_PARTITIONS, ROOT

    racers, rounds = 8, 10
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.marshal.racer",
                broker.bootstrap,
                f"r{i}",
                str(rounds),
                str(COORDINATION_PARTITIONS),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        for i in range(racers)
    ]
    # The first round once every racer is connected, with a moment to hear of it.
    for proc in procs:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready == "ready\n", f"a racer did not get ready: {ready!r}, exit {proc.poll()}"
    start_at = time.time() + 1
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start_at}\n")
        proc.stdin.flush()
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * racers, outputs
    winners: dict[int, list[str]] = {r: [] for r in range(rounds)}
    for output in outputs:
        for line in output.splitlines():
            round_, client, result = line.split()
            if result == "won":
                winners[int(round_)].append(client)
    final = state(broker.bootstrap)
    for round_, won in winners.items():
        assert len(won) == 1, f"round {round_}: winners {won}"
        assert final.owner(ClaimKey("race", "contested", round_)) == won[0]
