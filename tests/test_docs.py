"""Documentation that states facts the code decides: kept equal to the code."""

from __future__ import annotations

import ast
import json
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.api_key import ApiKey as KafkaApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from herdless.broker.handlers.apis import APIS
from tests.support.broker import BrokerProcess, loopback_host_with_free, module_broker
from tests.support.cli import assert_documented, sigint_as_in_a_terminal

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"


def documented_versions() -> set[tuple[int, str, int, int]]:
    text = (DOCS / "compatibility.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\d+)–(\d+) \|", text, flags=re.MULTILINE)
    return {(int(k), name, int(lo), int(hi)) for k, name, lo, hi in rows}


def test_compatibility_table_is_what_api_versions_advertises() -> None:
    documented = documented_versions()
    served = {(a.key, a.name, a.min_version, a.max_version) for a in APIS.values()}
    assert documented == served, (
        f"docs/compatibility.md lists {sorted(documented - served)} that are not served and "
        f"misses {sorted(served - documented)}"
    )


def test_compatibility_table_is_what_a_running_broker_answers(broker: BrokerProcess) -> None:
    """The ranges a client sees, asked the way clients ask (ApiVersions v3)."""
    request = ApiVersionsRequest[3](client_software_name="docs-test", client_software_version="1")
    request.with_header(correlation_id=7, client_id="docs-test")
    body = bytes(request.encode(header=True))
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        reader = sock.makefile("rb")
        (size,) = struct.unpack(">i", reader.read(4))
        response = ApiVersionsResponse.decode(reader.read(size), version=3, header=True)
    answered = {(e.api_key, e.min_version, e.max_version) for e in response.api_keys}
    assert answered == {(key, lo, hi) for key, _, lo, hi in documented_versions()}


# KIP-714's telemetry APIs and ListConfigResources, served by work not yet in this tree.
# Once they are in the API table this set can go.
_COMING = {71, 72, 74}


def documented_not_served() -> dict[int, str]:
    """The "Not served" section's table: key and API name of each row."""
    text = (DOCS / "compatibility.md").read_text()
    start = text.index("\n## Not served\n")
    section = text[start : text.index("\n## ", start + 1)]
    rows = re.findall(r"^\| (\d+) \| (\w+) \|", section, flags=re.MULTILINE)
    return {int(key): name for key, name in rows}


def test_every_kafka_api_is_served_or_said_why_not() -> None:
    """Each API key of Kafka 3.9 and 4 (kafka-python's table of them, keys 0 to 92) is in
    the versions table or the "Not served" one, under Kafka's name, and not in both."""
    kafka = {int(key): key.name for key in KafkaApiKey}
    served = {key: name for key, name, _, _ in documented_versions()}
    not_served = documented_not_served()
    assert not served.keys() & not_served.keys()
    assert {**served, **not_served}.items() <= kafka.items()
    missing = kafka.keys() - served.keys() - not_served.keys() - _COMING
    assert not missing, f"neither served nor in docs/compatibility.md's Not served: {missing}"
    assert not not_served.keys() & set(APIS), "an API served is listed as not served"


README = Path(__file__).parents[1] / "README.md"
KAFKA_PORT = 9092


def readme_commands(section: str) -> list[str]:
    """The command lines of the sh blocks in a section of the README, in order."""
    text = README.read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"^```sh\n(.*?)^```$", text[start:end], flags=re.MULTILINE | re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """At Kafka's port on a loopback address of its own: the README's `127.0.0.1:9092`
    becomes that address, and its `herdless` commands are given it as `-b HOST` alone."""
    host = loopback_host_with_free(KAFKA_PORT)
    data = tmp_path_factory.mktemp("docs") / "data"
    with module_broker(
        data, "--set", "group.initial.rebalance.delay.ms=0", host=host, port=KAFKA_PORT
    ) as process:
        yield process


def run_script(broker: BrokerProcess, lines: list[str]) -> subprocess.CompletedProcess[str]:
    script = "\n".join(
        [
            "set -euo pipefail",
            f'herdless() {{ {shlex.quote(sys.executable)} -m herdless "$@" -b {broker.host}; }}',
            *(line.replace("127.0.0.1:9092", broker.bootstrap) for line in lines),
        ]
    )
    return subprocess.run(
        ["bash", "-c", script], input="", capture_output=True, text=True, timeout=300
    )


def test_readme_quick_start_and_consumer_groups_run_top_to_bottom(broker: BrokerProcess) -> None:
    lines = readme_commands("Quick start") + readme_commands("Consumer groups")
    assert any(line.startswith("herdless groups reset-offsets") for line in lines)
    result = run_script(broker, lines)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # Three records, two sent by herdless and one by kcat; kcat's is read by kcat and
    # then by the group's member...
    assert result.stdout.count("page=/faq") == 2, result.stdout
    # ...and after the reset to the earliest offsets the group has them all to read again.
    lag = run_script(broker, ["herdless groups lag readers -o json"])
    assert json.loads(lag.stdout)["total_lag"] == 3, lag.stdout + lag.stderr


def test_cli_json_keys_are_the_documented_ones(broker: BrokerProcess) -> None:
    """Every path of docs/cli.md's JSON table, in the output of the command it names."""
    run_script(broker, ["herdless topics create keys --partitions 2"])
    run_script(broker, ["echo k=v | herdless produce keys -K = -H h=1"])
    run_script(broker, ["echo docs-secret | herdless users add docs-user --password-stdin"])
    member = subprocess.Popen(
        [sys.executable, "-m", "herdless", "consume", "keys", "-g", "watchers", "-b", broker.host],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=sigint_as_in_a_terminal,  # stopped with Ctrl-C below
    )
    try:
        commands = {
            "topics list": "topics list",
            "topics describe T": "topics describe keys",
            "cluster describe": "cluster describe",
            "consume T": "consume keys -n 1",
            "groups list": "groups list",
            "groups describe G": "groups describe watchers",
            "groups lag G": "groups lag watchers",
            "groups reset-offsets G": "groups reset-offsets readers --all-topics --to-latest",
            "groups history G": "groups history watchers",
            "groups configs G": "groups configs watchers",
            "users list": "users list",
            "cluster elect-leaders": "cluster elect-leaders --election-type preferred"
            " --topic keys --partition 0",
        }
        deadline = time.monotonic() + 30
        while True:  # until the member has joined and been assigned
            shown = run_script(broker, ["herdless groups describe watchers -o json"]).stdout
            if shown and any(m["partitions"] for g in json.loads(shown) for m in g["members"]):
                break
            assert time.monotonic() < deadline, shown
            time.sleep(0.2)
        for command, line in commands.items():
            result = run_script(broker, [f"herdless {line} -o json"])
            assert result.returncode == 0, result.stdout + result.stderr
            assert_documented(command, json.loads(result.stdout))
    finally:
        member.send_signal(signal.SIGINT)
        member.wait(30)
    deleted = run_script(broker, ["herdless groups delete-offsets readers --topic clicks -o json"])
    assert_documented("groups delete-offsets G", json.loads(deleted.stdout))


ARCHITECTURE = DOCS / "architecture.md"
SOURCE = ROOT / "src" / "herdless"


def drawn_floors() -> dict[str, int]:
    """The house of docs/architecture.md: each package (`broker/`) or module
    (`clock.py`) of src/herdless/ and its floor; the rooms in brackets are not read."""
    text = ARCHITECTURE.read_text()
    start = text.index("\n## The house\n")
    picture = re.search(r"^```text\n(.*?)^```$", text[start:], flags=re.MULTILINE | re.DOTALL)
    assert picture is not None, "docs/architecture.md: no picture under '## The house'"
    floors: dict[str, int] = {}
    for line in picture.group(1).splitlines():
        floor, _, names = line.partition(" ")
        for name in re.sub(r"\[.*?\]", "", names).split():
            assert name not in floors, f"{name} is drawn on two floors"
            floors[name] = int(floor)
    return floors


def part_of_house(module: str) -> str:
    """The package or top-level module of src/herdless/ that `herdless.x.y` is in,
    spelt as the picture spells it."""
    top = module.split(".")[1]
    return f"{top}/" if (SOURCE / top).is_dir() else f"{top}.py"


def herdless_imports(path: Path) -> set[str]:
    """Every herdless module `path` imports, wherever the import stands (under
    TYPE_CHECKING too: an arrow for the reader even if not at run time)."""
    package = ".".join(("herdless", *path.relative_to(SOURCE).parent.parts))
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                found.add(node.module)
    return {name for name in found if name.startswith("herdless.")}


def test_house_draws_every_package_once() -> None:
    built = {
        f"{entry.name}/" if entry.is_dir() else entry.name
        for entry in SOURCE.iterdir()
        if (entry / "__init__.py").is_file() or (entry.suffix == ".py" and entry.stem != "__init__")
    }
    drawn = set(drawn_floors())
    assert drawn == built, (
        f"docs/architecture.md draws {sorted(drawn - built)} that src/herdless/ does not hold "
        f"and leaves out {sorted(built - drawn)}"
    )


def test_house_has_no_import_running_up_or_across() -> None:
    floors = drawn_floors()
    wrong = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path.parent == SOURCE and path.name == "__init__.py":
            continue  # the package's face: a docstring and the version
        here = part_of_house("herdless." + ".".join(path.relative_to(SOURCE).with_suffix("").parts))
        for module in sorted(herdless_imports(path)):
            there = part_of_house(module)
            if there != here and floors[there] >= floors[here]:
                wrong.append(
                    f"{path.relative_to(SOURCE)} (floor {floors[here]}) imports {module}"
                    f" (floor {floors[there]})"
                )
    assert not wrong, "imports that run up or across the floors of docs/architecture.md:\n" + (
        "\n".join(wrong)
    )


def test_architecture_names_only_paths_that_exist() -> None:
    """Paths in backquotes: under src/herdless/, or from the repository's root for
    src/, tests/ and docs/, as the page says."""
    paths = [
        token
        for token in re.findall(r"`([^`\s]+)`", ARCHITECTURE.read_text())
        if ("/" in token or token.endswith(".py")) and not token.startswith("/")
    ]
    assert len(paths) > 100
    from_root = ("src/", "tests/", "docs/")
    missing = [
        path
        for path in paths
        if not (ROOT / path if path.startswith(from_root) else SOURCE / path).exists()
    ]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
