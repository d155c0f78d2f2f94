"""The console's pages drawn from a sampler's memory, without a broker or a socket."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from kafka import TopicPartition

from herdless.admin.group_info import GroupInfo, Member, Reconciliation
from herdless.admin.group_state import PartitionOffsets
from herdless.admin.share_group_state import ShareOffsets
from herdless.console.login import Login, Viewer
from herdless.console.memory import LagHistory
from herdless.console.pages import Pages, human_duration, human_size
from herdless.console.sampler import Sampler
from herdless.console.snapshot import Group, Snapshot, Topic

ODD_GROUP = 'a/b <script>alert("x")</script>'


def snapshot(taken_at: float, lag: int, groups: tuple[str, ...] = (ODD_GROUP,)) -> Snapshot:
    tp = TopicPartition("orders", 0)
    member = Member("m-1", "reader", "/127.0.0.1", None, (tp,))
    return Snapshot(
        taken_at,
        topics=[
            Topic(
                "orders",
                False,
                [
                    {
                        "partition": 0,
                        "leader": 0,
                        "leader_epoch": 0,
                        "replicas": [0],
                        "isr": [0],
                        "offline_replicas": [],
                        "log_start_offset": 0,
                        "log_end_offset": lag,
                        "records": lag,
                        "size_bytes": None,
                    }
                ],
            )
        ],
        groups={
            g: Group(
                GroupInfo(g, "Stable", "consumer", "range", (member,)),
                [PartitionOffsets(tp, 0, 0, lag, member)],
                "127.0.0.1:9092 (0)",
            )
            for g in groups
        },
        problems={"sizes": "the brokers do not answer DescribeLogDirs: sizes are not shown"},
    )


@pytest.fixture
def pages() -> Pages:
    sampler = Sampler("127.0.0.1:9092", interval_s=2.0)  # never started: no broker asked
    for second, lag in enumerate((5, 9, 7)):
        sampler.snapshot = snapshot(1_700_000_000 + second, lag)
        sampler.lag.record(sampler.snapshot)
    return Pages(sampler)


def text(pages: Pages, path: str, status: int = 200, fragment: bool = False) -> str:
    response = pages.get(path, fragment)
    assert response.status == status, response.body[:300]
    return response.body.decode()


def test_names_are_escaped_in_text_and_quoted_in_links(pages: Pages) -> None:
    shown = text(pages, "/groups")
    assert "<script>alert" not in shown
    assert "a/b &lt;script&gt;" in shown
    link = "/groups/a%2Fb%20%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E"
    assert f'href="{link}"' in shown
    # The link leads to the group's page.
    assert "Stable" in text(pages, link)


def test_a_fragment_is_the_page_without_its_frame(pages: Pages) -> None:
    whole = text(pages, "/topics")
    part = text(pages, "/topics", fragment=True)
    assert whole.startswith("<!doctype html>") and '<script src="/static/console.js"' in whole
    assert "<html" not in part and "<h1>Topics</h1>" in part
    assert part.strip() in whole


def test_a_missing_part_is_said_beside_what_is_shown(pages: Pages) -> None:
    shown = text(pages, "/topics")
    assert "Sizes unavailable: the brokers do not answer DescribeLogDirs" in shown
    assert 'data-topic="orders"' in shown


def test_the_lag_plot_has_a_point_per_sample(pages: Pages) -> None:
    shown = text(pages, f"/groups/{ODD_GROUP.replace('/', '%2F')}")
    assert 'class="lag-plot"' in shown and 'data-points="3"' in shown
    assert "3 samples since 2023-11-14 22:13:20 UTC" in shown


def test_unknown_paths_and_groups_are_not_found(pages: Pages) -> None:
    assert pages.get("/").status == 302
    assert pages.get("/").headers["Location"] == "/groups"
    assert "no page at /nothing" in text(pages, "/nothing", 404)
    assert "The brokers list no group nobody now" in text(pages, "/groups/nobody", 404)
    assert "The brokers list no topic nothing" in text(pages, "/topics/nothing", 404)


def test_static_files_are_only_the_console_own() -> None:
    pages = Pages(Sampler("127.0.0.1:9092", 2.0))
    assert pages.get("/static/console.js").content_type.startswith("text/javascript")
    for path in ("/static/../pages.py", "/static/pages.py", "/static/templates/page.html"):
        assert pages.get(path).status == 404, path


def test_before_the_first_look_pages_say_they_are_asking() -> None:
    sampler = Sampler("127.0.0.1:9092", 2.0)
    pages = Pages(sampler)
    for path in ("/groups", "/groups/g", "/topics", "/topics/t", "/brokers", "/rebalances"):
        assert "Asking the brokers" in text(pages, path), path
    sampler.problem = "no broker answers at 127.0.0.1:9092"
    assert "Cannot reach the brokers: no broker answers at 127.0.0.1:9092" in text(pages, "/groups")


def test_lag_history_forgets_groups_that_are_gone() -> None:
    history = LagHistory(size=2)
    history.record(snapshot(1.0, 3, groups=("a", "b")))
    history.record(snapshot(2.0, 4, groups=("a", "b")))
    history.record(snapshot(3.0, 5, groups=("a",)))
    assert history.of("a") == [(2.0, 4), (3.0, 5)]  # the oldest beyond `size` dropped
    assert history.of("b") == []


def test_sizes_and_durations_read_as_a_person_reads_them() -> None:
    assert [human_size(n) for n in (None, 0, 1023, 1536, 5 * 2**20)] == [
        "-",
        "0 B",
        "1023 B",
        "1.5 KiB",
        "5.0 MiB",
    ]
    assert [human_duration(ms) for ms in (None, 3, 999, 1850)] == ["-", "3 ms", "999 ms", "1.85 s"]


class OrdersOnly(Login):
    """A login that lets its user describe every group and the topic `orders` alone."""

    def describable(self, user: str, host: str, kind: str, names: Iterable[str]) -> list[str]:
        return [n for n in names if kind == "group" or n == "orders"]


def test_a_viewer_sees_no_assignment_or_lag_of_a_topic_they_may_not_describe() -> None:
    orders, payroll = TopicPartition("orders", 0), TopicPartition("payroll", 0)
    reconciliation = Reconciliation(3, "stable", None, (orders, payroll), (payroll,), ())
    member = Member("m-1", "reader", "/127.0.0.1", None, (orders, payroll), reconciliation)
    sampler = Sampler("127.0.0.1:9092", interval_s=2.0)
    for second, (orders_lag, payroll_lag) in enumerate(((1, 500), (2, 700))):
        rows = [
            PartitionOffsets(orders, 0, 0, orders_lag, member),
            PartitionOffsets(payroll, 0, 0, payroll_lag, member),
        ]
        info = GroupInfo("readers", "Stable", "consumer", "range", (member,))
        group = Group(info, rows, "127.0.0.1:9092 (0)")
        sampler.snapshot = Snapshot(1_700_000_000 + second, groups={"readers": group})
        sampler.lag.record(sampler.snapshot)
    viewer = Viewer("alice", "127.0.0.1", OrdersOnly())
    assert sampler.lag.of("readers", {"orders"}) == [(1_700_000_000, 1), (1_700_000_001, 2)]
    # Without a viewer (no login), everything, summed.
    assert sampler.lag.of("readers") == [(1_700_000_000, 501), (1_700_000_001, 702)]
    for path in ("/groups", "/groups/readers"):
        whole = Pages(sampler).get(path).body.decode()
        trimmed = Pages(sampler).get(path, viewer=viewer).body.decode()
        assert "702" in whole and "702" not in trimmed, path
        assert "payroll" not in trimmed, path
    shown = Pages(sampler).get("/groups/readers", viewer=viewer).body.decode()
    assert "orders[0]" in shown  # the member and its assignment are still shown


def test_a_share_groups_page_shows_start_offsets_not_committed_ones() -> None:
    tp = TopicPartition("orders", 0)
    member = Member("m-1", "worker", "/127.0.0.1", None, (tp,))
    info = GroupInfo("queue", "Stable", "share", "simple", (member,), group_protocol="share")
    rows = [ShareOffsets(tp, 4, 10, (member,), in_flight=3, archived=1)]
    sampler = Sampler("127.0.0.1:9092", interval_s=2.0)
    sampler.snapshot = Snapshot(1.0, groups={"queue": Group(info, [], None, rows)})
    sampler.lag.record(sampler.snapshot)
    shown = text(Pages(sampler), "/groups/queue")
    assert "Start offsets and lag per partition" in shown
    assert "Committed offset" not in shown
    for field, value in (("start-offset", 4), ("lag", 6), ("in-flight", 3), ("archived", 1)):
        assert f'data-field="{field}">{value}<' in shown, field
    assert sampler.lag.of("queue") == [(1.0, 6)]
