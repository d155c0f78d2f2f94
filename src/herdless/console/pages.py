"""The console's pages: a path in, a response out, drawn from what the sampler holds.

No sockets here (server.py has them), so every page renders in a plain call.
Each page is a fragment inside a frame of navigation; the page's script fetches
the fragment alone (`?fragment=1`) every interval and puts it in place.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import jinja2

from herdless.admin.cells import cell, format_partitions
from herdless.admin.group_info import Member
from herdless.admin.group_state import uncommitted_note
from herdless.console.clients import ClientTelemetry
from herdless.console.login import Viewer
from herdless.console.plot import lag_plot, rebalance_strip
from herdless.console.records import RecordBrowser, browse_page
from herdless.console.sampler import Sampler
from herdless.console.snapshot import Group, Topic, Transactions

if TYPE_CHECKING:
    from kafka import TopicPartition

NAVIGATION = (
    ("/groups", "Groups"),
    ("/topics", "Topics"),
    ("/brokers", "Brokers"),
    ("/rebalances", "Rebalances"),
    ("/transactions", "Transactions"),
    ("/clients", "Clients"),
)
STATIC = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
HTML = "text/html; charset=utf-8"
LONGEST_FLOOR_MS = 1000


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = HTML
    headers: dict[str, str] = field(default_factory=dict)


class Pages:
    def __init__(
        self,
        sampler: Sampler,
        viewer: Viewer | None = None,
        env: jinja2.Environment | None = None,
        records: RecordBrowser | None = None,
        telemetry: ClientTelemetry | None = None,
    ) -> None:
        self.sampler = sampler
        self.viewer = viewer
        self.env = env if env is not None else _environment()
        self.records = records if records is not None else RecordBrowser()
        self.telemetry = telemetry or ClientTelemetry((), sampler.interval_s)

    def get(
        self,
        path: str,
        fragment: bool = False,
        viewer: Viewer | None = None,
        query: Mapping[str, list[str]] | None = None,
    ) -> Response:
        """The page at `path` (with the `query` the message browser takes), showing
        `viewer` (a signed-in user, when the console has a login) only the topics and
        groups they may describe."""
        if viewer is not None:
            return Pages(self.sampler, viewer, self.env, self.records, self.telemetry)._get(
                path, fragment, query
            )
        return self._get(path, fragment, query)

    def login_page(self, status: int, message: str | None = None) -> Response:
        context = {"message": message, "title": "Log in", "bootstrap": self.sampler.bootstrap}
        body = self.env.get_template("login.html").render(context).encode()
        return Response(status, body)

    def _get(
        self, path: str, fragment: bool, query: Mapping[str, list[str]] | None = None
    ) -> Response:
        if path == "/":
            return Response(302, b"", headers={"Location": "/groups"})
        if path.startswith("/static/"):
            return _static(path.removeprefix("/static/"))
        section, _, rest = path.strip("/").partition("/")
        # /topics/T/partitions/P: the message browser (topic names hold no slash).
        topic, slash, partition = rest.partition("/partitions/")
        if section == "topics" and slash and "/" not in topic + partition:
            return self._records(unquote(topic), unquote(partition), query or {}, fragment)
        page = {
            "groups": self._groups,
            "topics": self._topics,
            "brokers": self._brokers,
            "rebalances": self._rebalances,
            "transactions": self._transactions,
            "clients": self._clients,
        }.get(section)
        if page is None:
            return self._page(404, "not-found.html", "/" + section, "Not found", {}, fragment)
        return page(unquote(rest), fragment)

    # -- what the viewer may see ---------------------------------------------

    def _visible_groups(self) -> dict[str, Group]:
        snapshot = self.sampler.snapshot
        groups = snapshot.groups if snapshot else {}
        if self.viewer is None:
            return dict(groups)
        # Kafka's OffsetFetch leaves out partitions of topics the caller may not describe;
        # members' assignments are trimmed alike, so no page names such a topic.
        topics = self._describable_topics(groups.values())
        return {
            group_id: _trimmed(groups[group_id], topics) for group_id in self.viewer.groups(groups)
        }

    def _describable_topics(self, groups: Iterable[Group]) -> set[str] | None:
        """The topics these groups name that the viewer may describe (None: all of them)."""
        if self.viewer is None:
            return None
        named = {topic for g in groups for topic in g.topics}
        named |= {tp.topic for g in groups for m in g.info.members for tp in m.partitions or ()}
        return set(self.viewer.topics(named))

    def _lag_of(self, group: Group | None, group_id: str) -> list[tuple[float, int]]:
        if self.viewer is None:
            return self.sampler.lag.of(group_id)
        # Only topics the group names now: a topic it no longer names cannot be checked.
        return self.sampler.lag.of(group_id, self._describable_topics([group] if group else []))

    def _visible_topics(self) -> list[Topic]:
        snapshot = self.sampler.snapshot
        topics = snapshot.topics if snapshot else []
        if self.viewer is None:
            return list(topics)
        allowed = set(self.viewer.topics(t.name for t in topics))
        return [t for t in topics if t.name in allowed]

    def _visible_transactions(self) -> Transactions | None:
        snapshot = self.sampler.snapshot
        found = snapshot.transactions if snapshot else None
        if self.viewer is None or found is None:
            return found
        # A transaction is shown to who may describe its id and every topic it writes;
        # a hanging one, which no coordinator names, to who may describe its topic.
        ids = set(self.viewer.transactional_ids(row["transactional_id"] for row in found.open))
        named = {p.rsplit("-", 1)[0] for row in found.open for p in row["partitions"]}
        named |= {row["topic"] for row in found.hanging}
        topics = set(self.viewer.topics(named))
        return Transactions(
            [
                row
                for row in found.open
                if row["transactional_id"] in ids
                and all(p.rsplit("-", 1)[0] in topics for p in row["partitions"])
            ],
            [row for row in found.hanging if row["topic"] in topics],
        )

    def _visible_rebalances(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.viewer is None:
            return entries
        allowed = set(self.viewer.groups({e.get("group_id", "") for e in entries}))
        return [e for e in entries if e.get("group_id", "") in allowed]

    # -- pages ---------------------------------------------------------------

    def _groups(self, group_id: str, fragment: bool) -> Response:
        if group_id:
            return self._group(group_id, fragment)
        groups = list(self._visible_groups().values())
        sparklines = {
            g.info.group_id: lag_plot(self._lag_of(g, g.info.group_id), 160, 32, labels=False)
            for g in groups
        }
        return self._page(
            200,
            "groups.html",
            "/groups",
            "Consumer groups",
            {"groups": groups, "sparklines": sparklines},
            fragment,
        )

    def _group(self, group_id: str, fragment: bool) -> Response:
        snapshot = self.sampler.snapshot
        if self.viewer is not None and not self.viewer.groups([group_id]):
            # As if it did not exist: a name the user may not describe is not confirmed.
            return self._page(404, "not-found.html", "/groups", "Not found", {}, fragment)
        group = self._visible_groups().get(group_id)
        rebalances = self.sampler.rebalances.of(group_id)
        samples = self._lag_of(group, group_id)
        known = group is not None or rebalances or samples or snapshot is None
        context = {
            "group_id": group_id,
            "group": group,
            "notes": uncommitted_note(group.rows) if group else [],
            "samples": samples,
            "plot": lag_plot(samples),
            **self._timeline(rebalances),
        }
        status = 200 if known else 404
        return self._page(status, "group.html", "/groups", f"Group {group_id}", context, fragment)

    def _topics(self, name: str, fragment: bool) -> Response:
        snapshot = self.sampler.snapshot
        topics = self._visible_topics()
        if not name:
            context = {"topics": topics}
            return self._page(200, "topics.html", "/topics", "Topics", context, fragment)
        topic = next((t for t in topics if t.name == name), None)
        status = 404 if topic is None and snapshot is not None else 200
        context = {"name": name, "topic": topic}
        return self._page(status, "topic.html", "/topics", f"Topic {name}", context, fragment)

    def _records(
        self, topic: str, partition: str, query: Mapping[str, list[str]], fragment: bool
    ) -> Response:
        title = f"Topic {topic} partition {partition}"
        if self.viewer is not None and not self.viewer.topics([topic]):
            # As if it did not exist, as the topic's own page answers.
            return self._page(404, "not-found.html", "/topics", "Not found", {}, fragment)
        status, context = browse_page(
            self.records,
            self.sampler.bootstrap,
            self.sampler.client_settings,
            self.viewer,
            topic,
            partition,
            query,
        )
        # A page read on demand: refreshing it would read the brokers again, and move
        # the records under the reader's eyes.
        context["live"] = False
        return self._page(status, "records.html", "/topics", title, context, fragment)

    def _brokers(self, rest: str, fragment: bool) -> Response:
        snapshot = self.sampler.snapshot
        context = {"cluster": snapshot.cluster if snapshot else None}
        status = 404 if rest else 200
        return self._page(status, "brokers.html", "/brokers", "Brokers", context, fragment)

    def _rebalances(self, rest: str, fragment: bool) -> Response:
        context = self._timeline(self._visible_rebalances(self.sampler.rebalances.latest()))
        status = 404 if rest else 200
        return self._page(status, "rebalances.html", "/rebalances", "Rebalances", context, fragment)

    def _transactions(self, rest: str, fragment: bool) -> Response:
        context = {"transactions": self._visible_transactions()}
        status = 404 if rest else 200
        return self._page(
            status, "transactions.html", "/transactions", "Transactions", context, fragment
        )

    def _clients(self, rest: str, fragment: bool) -> Response:
        context = {"look": self.telemetry.look()}
        status = 404 if rest else 200
        return self._page(status, "clients.html", "/clients", "Clients", context, fragment)

    def _timeline(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        """What _timeline.html draws."""
        return {
            "rebalances": entries,
            "strip": rebalance_strip(entries, int(time.time() * 1000)),
            # Bars to one scale: the longest rebalance, or a second if all were quicker.
            "longest_ms": max([LONGEST_FLOOR_MS, *(e.get("duration_ms") or 0 for e in entries)]),
            "history_problem": self.sampler.rebalances.problem,
        }

    # -- frame ---------------------------------------------------------------

    def _page(
        self,
        status: int,
        template: str,
        section: str,
        title: str,
        context: dict[str, Any],
        fragment: bool,
    ) -> Response:
        snapshot = self.sampler.snapshot
        shared = {
            "fragment": template,
            "title": title,
            "section": section,
            "navigation": NAVIGATION,
            "bootstrap": self.sampler.bootstrap,
            "interval_s": self.sampler.interval_s,
            "period_s": self.sampler.period_s,
            "took_s": self.sampler.took_s,
            "snapshot": snapshot,
            "problems": snapshot.problems if snapshot else {},
            "problem": self.sampler.problem,
            "user": self.viewer.user if self.viewer is not None else None,
            "live": True,
            **context,
        }
        name = template if fragment else "page.html"
        body = self.env.get_template(name).render(shared).encode()
        return Response(status, body)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("herdless.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        cell=cell,
        urlpart=lambda text: quote(str(text), safe=""),
        size=human_size,
        duration=human_duration,
        clock=clock,
        slug=slug,
        partitions=format_partitions,
    )
    return env


def _static(name: str) -> Response:
    if name not in STATIC:
        return Response(404, b"not found", "text/plain; charset=utf-8")
    body = resources.files("herdless.console").joinpath("static", name).read_bytes()
    return Response(200, body, STATIC[name])


def human_size(size: int | None) -> str:
    """Bytes as a person reads them: 512 B, 1.5 KiB, 3.2 MiB."""
    if size is None:
        return cell(None)
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_duration(ms: int | float | None) -> str:
    if ms is None:
        return cell(None)
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def clock(seconds: float | None) -> str:
    """A time as the console shows it, in UTC as `herdless groups history` does."""
    if seconds is None:
        return cell(None)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def slug(text: str) -> str:
    """A word for a CSS class: `member joined` is `member-joined`."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def _trimmed(group: Group, topics: set[str] | None) -> Group:
    """The group with only the partitions of `topics` in its rows and assignments."""
    if topics is None:
        return group

    def kept(partitions: tuple[TopicPartition, ...]) -> tuple[TopicPartition, ...]:
        return tuple(tp for tp in partitions if tp.topic in topics)

    def member(m: Member) -> Member:
        reconciliation = m.reconciliation and dataclasses.replace(
            m.reconciliation,
            target=kept(m.reconciliation.target),
            to_revoke=kept(m.reconciliation.to_revoke),
            to_assign=kept(m.reconciliation.to_assign),
        )
        partitions = None if m.partitions is None else kept(m.partitions)
        return dataclasses.replace(m, partitions=partitions, reconciliation=reconciliation)

    return dataclasses.replace(
        group,
        rows=[r for r in group.rows if r.tp.topic in topics],
        share=None if group.share is None else [r for r in group.share if r.tp.topic in topics],
        info=dataclasses.replace(group.info, members=tuple(member(m) for m in group.info.members)),
    )
