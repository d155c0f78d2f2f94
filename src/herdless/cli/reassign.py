"""`herdless cluster reassign` and `herdless cluster drain`: moving partitions between
brokers as kafka-reassign-partitions.sh does (KIP-455's AlterPartitionReassignments).

`reassign` takes the tool's actions and JSON files:

    --generate --topics-to-move-json-file F --broker-list 1,2,3
        prints the current assignment and a proposal spreading those topics' partitions
        over the brokers listed; F is {"version": 1, "topics": [{"topic": "clicks"}]}
    --execute --reassignment-json-file F [--throttle BYTES_PER_S] [--additional]
        starts the reassignment F describes, after printing the assignment it replaces
        (keep it to roll back with); with --throttle, the moving replicas are throttled
        (the topics' leader/follower.replication.throttled.replicas) and the brokers'
        leader/follower.replication.throttled.rate set; while reassignments are in
        progress it starts none unless --additional
    --verify --reassignment-json-file F
        says, for each partition, whether its reassignment is complete; once all are,
        removes the throttles, as the tool does
    --cancel --reassignment-json-file F
        cancels the partitions' reassignments in progress: they go back to their
        original replicas

F for the last three is {"version": 1, "partitions": [{"topic": T, "partition": P,
"replicas": [B, ...]}, ...]}, what --generate proposes.

`drain N` moves every replica off broker N, each to the other broker hosting fewest
replicas, keeping each partition's replication factor; its leaderships go with them. It
waits until N hosts and leads nothing, then says so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import counted, say

# Between two looks at whether reassignments are done.
_POLL_S = 0.5


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror or exc}", USAGE) from None
    except ValueError as exc:
        raise fail(f"{path} is not JSON: {exc}", USAGE) from None


def _topics_to_move(path: Path) -> list[str]:
    document = _read_json(path)
    entries = document.get("topics") if isinstance(document, dict) else None
    topics = [e.get("topic") for e in entries if isinstance(e, dict)] if entries else []
    if (
        not entries
        or len(topics) != len(entries)
        or not all(isinstance(t, str) and t for t in topics)
    ):
        raise fail(
            f'{path} must hold {{"version": 1, "topics": [{{"topic": T}}, ...]}},'
            " as kafka-reassign-partitions.sh reads it",
            USAGE,
        )
    return list(dict.fromkeys(topics))


def _broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        brokers = []
    if not brokers or any(b < 0 for b in brokers) or len(set(brokers)) != len(brokers):
        raise fail(f"--broker-list must be distinct broker ids like 1,2,3, not {text!r}", USAGE)
    return brokers


def _names(keys: Any) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


def reassign(
    generate: Annotated[
        bool, typer.Option("--generate", help="Propose an assignment.", show_default=False)
    ] = False,
    execute: Annotated[
        bool, typer.Option("--execute", help="Start a reassignment.", show_default=False)
    ] = False,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Say whether it is complete.", show_default=False),
    ] = False,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel it: back to the original replicas.")
    ] = False,
    topics_to_move_json_file: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="With --generate: the topics.", show_default=False),
    ] = None,
    broker_list: Annotated[
        str | None,
        typer.Option(
            metavar="IDS", help="With --generate: the brokers, like 1,2,3.", show_default=False
        ),
    ] = None,
    additional: Annotated[
        bool,
        typer.Option(
            "--additional",
            help="With --execute: replace reassignments in progress.",
            show_default=False,
        ),
    ] = False,
    throttle: Annotated[
        int | None,
        typer.Option(
            metavar="BYTES_PER_S",
            min=0,
            help="With --execute: the replication rate of the replicas moving.",
            show_default=False,
        ),
    ] = None,
    reassignment_json_file: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The reassignment, in kafka-reassign-partitions.sh's JSON form.",
            show_default=False,
        ),
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Move partitions between brokers, as kafka-reassign-partitions.sh does."""
    actions = {"--generate": generate, "--execute": execute, "--verify": verify}
    actions["--cancel"] = cancel
    if sum(actions.values()) != 1:
        raise fail("give exactly one of --generate, --execute, --verify and --cancel", USAGE)
    from herdless.admin import reassignment
    from herdless.admin.errors import AdminError
    from herdless.cli.client import connect
    from herdless.cluster.assignment import propose_reassignment
    from herdless.cluster.errors import InvalidReplicationFactor

    if generate:
        if topics_to_move_json_file is None or broker_list is None:
            raise fail("--generate needs --topics-to-move-json-file and --broker-list", USAGE)
        topics = _topics_to_move(topics_to_move_json_file)
        brokers = _broker_list(broker_list)
        with connect(bootstrap) as admin:
            try:
                current = reassignment.current_assignment(admin, topics)
            except AdminError as exc:
                raise fail(str(exc)) from None
        try:
            proposed = propose_reassignment(current, brokers)
        except InvalidReplicationFactor as exc:
            raise fail(str(exc)) from None
        say("Current partition replica assignment")
        say(json.dumps(reassignment.plan_document(current)))
        say("")
        say("Proposed partition reassignment configuration")
        say(json.dumps(reassignment.plan_document(proposed)))
        return
    if (throttle is not None or additional) and not execute:
        raise fail("--throttle and --additional go with --execute", USAGE)
    if reassignment_json_file is None:
        action = next(name for name, chosen in actions.items() if chosen)
        raise fail(f"{action} needs --reassignment-json-file", USAGE)
    try:
        plan = reassignment.read_plan(
            _read_json(reassignment_json_file), str(reassignment_json_file)
        )
    except AdminError as exc:
        raise fail(str(exc), USAGE) from None
    with connect(bootstrap) as admin:
        try:
            if execute:
                _execute(admin, plan, throttle, additional)
            elif verify:
                _verify(admin, plan)
            else:
                _cancel(admin, plan)
        except AdminError as exc:
            raise fail(str(exc)) from None


def _execute(
    admin: Any, plan: dict[tuple[str, int], list[int]], throttle: int | None, additional: bool
) -> None:
    from herdless.admin import reassignment

    if not additional and reassignment.in_progress(admin):
        raise fail(
            "Cannot execute because there is an existing partition assignment. Use"
            " --additional to override this and create a new partition assignment in"
            " addition to the existing one."
        )
    topics = sorted({t for t, _ in plan})
    current = reassignment.current_assignment(admin, topics)
    unknown = sorted(set(plan) - set(current))
    if unknown:
        raise fail(f"no such partitions: {_names(unknown)}")
    say("Current partition replica assignment")
    say("")
    say(json.dumps(reassignment.plan_document({k: current[k] for k in plan})))
    say("")
    say("Save this to use as the --reassignment-json-file option during rollback")
    if throttle is not None:
        _throttle(admin, current, plan, throttle)
    refused = reassignment.alter(admin, plan)
    for (topic, partition), why in sorted(refused.items()):
        say(f"Error reassigning partition(s): {topic}-{partition}: {why}")
    started = sorted(set(plan) - set(refused))
    if started:
        say(f"Successfully started partition reassignments for {_names(started)}")
    if refused:
        raise fail(f"{counted(len(refused), 'partition')} could not be reassigned")


def _throttle(
    admin: Any,
    current: dict[tuple[str, int], list[int]],
    plan: dict[tuple[str, int], list[int]],
    rate: int,
) -> None:
    from herdless.admin import reassignment

    topics = reassignment.throttled_replicas(current, plan)
    brokers = reassignment.broker_ids(admin)
    problems = reassignment.set_throttles(admin, topics, brokers, rate)
    say(
        "Warning: You must run --verify periodically, until the reassignment completes,"
        " to ensure the throttle is removed."
    )
    if problems:
        # A broker that refuses the rate, or cannot be reached, keeps the one it has.
        say(
            "The topics' throttled replicas are set; the brokers kept their replication"
            f" rates ({'; '.join(problems)})"
        )
    else:
        say(f"The inter-broker throttle limit was set to {rate} B/s")


def _verify(admin: Any, plan: dict[tuple[str, int], list[int]]) -> None:
    from herdless.admin import reassignment

    ongoing = reassignment.in_progress(admin)
    current = reassignment.current_assignment(admin, sorted({t for t, _ in plan}))
    say("Status of partition reassignment:")
    unfinished = 0
    for key in sorted(plan):
        name = f"{key[0]}-{key[1]}"
        if key in ongoing:
            unfinished += 1
            say(f"Reassignment of partition {name} is still in progress.")
        elif current.get(key) == plan[key]:
            say(f"Reassignment of partition {name} is completed.")
        else:
            unfinished += 1
            say(
                f"There is no active reassignment of partition {name}, but replica set is"
                f" {current.get(key, [])} rather than {plan[key]}."
            )
    if unfinished:
        raise fail(f"{counted(unfinished, 'partition')} not reassigned yet")
    topics = sorted({t for t, _ in plan})
    brokers = reassignment.broker_ids(admin)
    say(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    for topic in topics:
        say(f"Clearing topic-level throttles on topic {topic}")
    problems = reassignment.clear_throttles(admin, topics, brokers)
    if problems:
        say(f"Some throttles could not be cleared: {'; '.join(problems)}")


def _cancel(admin: Any, plan: dict[tuple[str, int], list[int]]) -> None:
    from herdless.admin import reassignment

    ongoing = reassignment.in_progress(admin)
    asked = {key: None for key in plan if key in ongoing}
    refused = reassignment.alter(admin, asked) if asked else {}
    cancelled = sorted(set(asked) - set(refused))
    for (topic, partition), why in sorted(refused.items()):
        say(f"Error cancelling reassignment of {topic}-{partition}: {why}")
    say(f"Successfully cancelled partition reassignments for: {_names(cancelled)}")
    if refused:
        raise fail(f"{counted(len(refused), 'reassignment')} could not be cancelled")


def drain(
    broker: Annotated[int, typer.Argument(metavar="BROKER", help="The broker to empty.")],
    timeout: Annotated[
        float,
        typer.Option(metavar="SECONDS", min=0, help="How long to wait for the moves to finish."),
    ] = 600.0,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Move every replica and leadership off a broker, before retiring it."""
    from herdless.admin import reassignment
    from herdless.admin.errors import AdminError
    from herdless.cli.client import connect

    with connect(bootstrap) as admin:
        try:
            brokers = reassignment.broker_ids(admin)
            current = reassignment.current_assignment(admin)
            # A broker that is down may still be drained: its replicas move all the same.
            if broker not in brokers and not any(broker in r for r in current.values()):
                raise fail(
                    f"broker {broker} is not registered and hosts nothing (brokers: {brokers})"
                )
            hosted = {k for k, replicas in current.items() if broker in replicas}
            leaders = reassignment.leaders(admin)
            offline = sorted(k for k in hosted if leaders.get(k, -1) < 0)
            if offline:
                # No leader to copy from: only the broker drained has the records.
                raise fail(
                    f"{_names(offline)} have no leader: their records are only on broker"
                    f" {broker}; start it again, then drain it"
                )
            plan = reassignment.drain_plan(current, broker, brokers)
            if plan:
                refused = reassignment.alter(admin, plan)
                if refused:
                    shown = "; ".join(f"{t}-{p}: {why}" for (t, p), why in sorted(refused.items()))
                    raise fail(f"the controller refused to move: {shown}")
                say(f"moving {counted(len(plan), 'replica')} off broker {broker}")
            _wait_drained(admin, broker, timeout)
        except AdminError as exc:
            raise fail(str(exc)) from None
    say(f"broker {broker} hosts and leads nothing")


def _wait_drained(admin: Any, broker: int, timeout_s: float) -> None:
    from kafka.errors import KafkaConnectionError, NodeNotReadyError

    from herdless.admin import reassignment

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            hosted = [k for k, r in reassignment.current_assignment(admin).items() if broker in r]
            led = [k for k, leader in reassignment.leaders(admin).items() if leader == broker]
        except (KafkaConnectionError, NodeNotReadyError) as exc:
            # The broker drained may be down and still named in metadata: look again.
            if time.monotonic() >= deadline:
                raise fail(f"cannot tell whether broker {broker} is drained: {exc}") from None
        else:
            if not hosted and not led:
                return
            if time.monotonic() >= deadline:
                raise fail(
                    f"after {timeout_s:.0f}s broker {broker} still hosts"
                    f" {counted(len(hosted), 'replica')} and leads"
                    f" {counted(len(led), 'partition')} ({_names(hosted[:10])}); the moves"
                    " carry on: see `herdless cluster reassign --verify`"
                )
        time.sleep(_POLL_S)
