"""`herdless cluster elect-leaders`: leader elections as kafka-leader-election.sh asks
the controller for them (ElectLeaders, KIP-460).

`--election-type preferred` hands partitions back to their preferred leaders (the
first replica of each assignment) where that replica is alive and in the ISR;
`unclean` elects any live replica of a partition whose ISR has no live member, at
the risk of losing records the ISR had. The partitions come from `--topic` with
`--partition`, from `--all-topic-partitions`, or from a JSON file in the tool's form:

    {"partitions": [{"topic": "clicks", "partition": 0}]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import OutputOption, Table, View, counted, show


def read_partitions_file(path: Path) -> list[tuple[str, int]]:
    """kafka-leader-election.sh's --path-to-json-file: its (topic, partition) pairs."""
    try:
        document = json.loads(path.read_text())
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror or exc}", USAGE) from None
    except ValueError as exc:
        raise fail(f"{path} is not JSON: {exc}", USAGE) from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise fail(
            f'{path} must hold {{"partitions": [{{"topic": T, "partition": P}}, ...]}},'
            " as kafka-leader-election.sh reads it",
            USAGE,
        )
    partitions: list[tuple[str, int]] = []
    for number, entry in enumerate(entries, 1):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if (
            not isinstance(topic, str)
            or not topic
            or not isinstance(partition, int)
            or isinstance(partition, bool)
            or partition < 0
        ):
            raise fail(
                f"{path}: partition entry {number} needs a topic and a partition >= 0,"
                f" got {json.dumps(entry)}",
                USAGE,
            )
        if (topic, partition) in partitions:
            # As Kafka's tool refuses a file that names a partition twice.
            raise fail(f"{path}: {topic}:{partition} is given twice", USAGE)
        partitions.append((topic, partition))
    return partitions


def elect_leaders(
    election_type: Annotated[
        str,
        typer.Option(
            "--election-type",
            metavar="preferred|unclean",
            help="preferred: back to each partition's first replica; unclean: any live"
            " replica of a partition whose ISR has none.",
            show_default=False,
        ),
    ],
    all_topic_partitions: Annotated[
        bool,
        typer.Option(
            "--all-topic-partitions", help="Every partition of every topic.", show_default=False
        ),
    ] = False,
    topic: Annotated[
        str | None,
        typer.Option(metavar="TOPIC", help="The topic, with --partition.", show_default=False),
    ] = None,
    partition: Annotated[
        int | None,
        typer.Option(metavar="N", min=0, help="The partition of --topic.", show_default=False),
    ] = None,
    path_to_json_file: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The partitions in kafka-leader-election.sh's JSON form.",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Elect partitions' leaders, preferred or unclean, as kafka-leader-election.sh does."""
    from herdless.admin.leader_election import ELECTION_TYPES

    kind = election_type.strip().lower()
    if kind not in ELECTION_TYPES:
        raise fail(f"--election-type must be preferred or unclean, not {election_type!r}", USAGE)
    chosen = [all_topic_partitions, topic is not None, path_to_json_file is not None]
    if sum(chosen) != 1:
        raise fail(
            "give exactly one of --all-topic-partitions, --topic with --partition, and"
            " --path-to-json-file",
            USAGE,
        )
    if (topic is None) != (partition is None):
        raise fail("--topic and --partition go together", USAGE)
    partitions: list[tuple[str, int]] | None = None
    if path_to_json_file is not None:
        partitions = read_partitions_file(path_to_json_file)
    elif topic is not None and partition is not None:
        partitions = [(topic, partition)]

    from herdless.admin.errors import AdminError
    from herdless.admin.leader_election import elect_leaders as elect
    from herdless.cli.client import connect

    with connect(bootstrap) as admin:
        try:
            rows = elect(admin, kind, partitions)
        except AdminError as exc:
            raise fail(str(exc)) from None
    elected = sum(1 for r in rows if r["outcome"] == "elected")
    failed = [r for r in rows if r["outcome"] == "failed"]
    notes = [f"{kind} election: {counted(elected, 'partition')} elected"]
    if partitions is None and not rows:
        notes = [f"{kind} election: no partition needed one"]
    show(
        View(
            data=rows,
            tables=[
                Table(
                    ("TOPIC", "PARTITION", "OUTCOME", "LEADER", "ERROR"),
                    [
                        (
                            r["topic"],
                            r["partition"],
                            r["outcome"],
                            r["leader"] if r["leader"] >= 0 else "none",
                            r["error"] or "",
                        )
                        for r in rows
                    ],
                )
            ]
            if rows
            else [],
            notes=notes,
        ),
        output,
    )
    if failed:
        # As kafka-leader-election.sh fails when a replica could not be elected.
        raise fail(f"{counted(len(failed), 'partition')} could not be elected")
