"""docs/share-groups.md runs as written: its Python blocks against a broker at Kafka's
port, then what the worker did is checked: every job done once, the released ones on
their second delivery, and the group's start offsets at the end of the log, as
`herdless share-groups describe` shows them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess, loopback_host_with_free, module_broker
from tests.support.cli import herdless, succeeded

GUIDE = Path(__file__).parents[1] / "docs" / "share-groups.md"
KAFKA_PORT = 9092


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """At Kafka's port on a loopback address of its own: the guide's `127.0.0.1:9092`."""
    host = loopback_host_with_free(KAFKA_PORT)
    with module_broker(
        tmp_path_factory.mktemp("share-guide") / "data", host=host, port=KAFKA_PORT
    ) as process:
        yield process


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), flags=re.M | re.S)


def test_the_guide_runs_and_its_worker_does_every_job_once(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = python_blocks()
    assert len(blocks) == 2
    for block in blocks:
        code = block.replace("127.0.0.1:9092", broker.bootstrap)
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "guide"})  # noqa: S102
    done = re.findall(r"^did (job-\d+) \(delivery (\d)\)$", capsys.readouterr().out, re.M)
    assert sorted(job for job, _ in done) == sorted(f"job-{n}" for n in range(20))
    assert {job: count for job, count in done if count != "1"} == {"job-7": "2", "job-17": "2"}
    described = json.loads(
        succeeded(
            herdless(
                "share-groups", "describe", "jobs-workers", "-o", "json", "-b", broker.bootstrap
            )
        )
    )
    offsets = described[0]["offsets"]
    assert sum(o["start_offset"] for o in offsets) == 20
    assert [o["lag"] for o in offsets] == [0, 0]
