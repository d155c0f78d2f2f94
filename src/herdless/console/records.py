"""The message browser's page: a partition's records, read when the page is asked for.

Unlike the other pages, drawn from the sampler's last look, each browser page is
a read of the brokers of its own (admin/partition_records.py): a consumer that
joins no group, made for the page and closed after it, and never refreshed
behind the reader's back. A few pages are read at once; more wait their turn.

With a login, records are read as the signed-in user: their own client reads them
when the console logs in to the brokers for them, else the console's client
reads them once the broker's authorizer has said that the user may READ the topic.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from herdless.admin.errors import AdminError
from herdless.admin.partition_records import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    NoSuchPartition,
    OffsetOutOfRange,
    PartitionReader,
    ReadDenied,
    Record,
    RecordPage,
)
from herdless.console.login import Viewer
from herdless.console.record_view import SHOWN_BYTES, WHOLE_BYTES, FieldView, Format, view

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# Pages read from the brokers at once; a request beyond waits this long for a turn.
READS_AT_ONCE = 4
TURN_WAIT_S = 15.0
FIELDS = ("key", "value", "headers")
TIME_EXAMPLE = "2026-11-29T08:00:00Z"


class BadRequest(ValueError):
    """A query the browser cannot take; the message names the parameter."""


@dataclass(frozen=True, slots=True)
class Browse:
    """What a browser page asks for, from its query string."""

    offset: int | None = None
    before: int | None = None
    time_ms: int | None = None
    time_text: str = ""
    size: int = DEFAULT_PAGE_SIZE
    isolation: str = READ_COMMITTED
    formats: dict[str, Format] = field(default_factory=lambda: dict.fromkeys(FIELDS, Format.AUTO))
    whole: int | None = None  # the offset of the record shown whole

    @property
    def start(self) -> str | None:
        """Where the page starts, as the `from` parameter says it."""
        return self.time_text or (None if self.offset is None else str(self.offset))

    def query(self, **changes: Any) -> str:
        """This page's query string with `changes` (None leaves a parameter out):
        size, isolation and formats carry over to the pages it links to."""
        params: dict[str, Any] = {"from": self.start, "before": self.before}
        params.update(changes)
        if self.size != DEFAULT_PAGE_SIZE:
            params["size"] = self.size
        if self.isolation != READ_COMMITTED:
            params["isolation"] = self.isolation
        params.update({n: f.value for n, f in self.formats.items() if f is not Format.AUTO})
        return urlencode({k: v for k, v in params.items() if v is not None})


def parse_browse(query: Mapping[str, list[str]]) -> Browse:
    """BadRequest names a parameter that will not do."""

    def one(name: str) -> str | None:
        values = [v.strip() for v in query.get(name, []) if v.strip()]
        return values[-1] if values else None

    start, before = one("from"), _offset(one("before"), "before")
    if start is not None and before is not None:
        raise BadRequest("give where to read from or what to read before, not both")
    # An offset is a number; anything else must be a time.
    offset = int(start) if start is not None and start.isdigit() else None
    time_text = start if start is not None and offset is None else ""
    size_text = one("size")
    size = DEFAULT_PAGE_SIZE if size_text is None else _whole_number(size_text, "size")
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise BadRequest(f"size is records a page, 1 to {MAX_PAGE_SIZE}; got {size_text}")
    isolation = one("isolation") or READ_COMMITTED
    if isolation not in ISOLATION_LEVELS:
        raise BadRequest(f"isolation is {' or '.join(ISOLATION_LEVELS)}; got {isolation!r}")
    formats = {}
    for name in FIELDS:
        text = (one(name) or Format.AUTO.value).lower()
        try:
            formats[name] = Format(text)
        except ValueError:
            known = ", ".join(f.value for f in Format)
            raise BadRequest(f"{name} is shown as one of {known}; got {text!r}") from None
    return Browse(
        offset=offset,
        before=before,
        time_ms=_time_ms(time_text) if time_text else None,
        time_text=time_text,
        size=size,
        isolation=isolation,
        formats=formats,
        whole=_offset(one("whole"), "whole"),
    )


def _whole_number(text: str, name: str) -> int:
    if not text.isdigit():
        raise BadRequest(f"{name} is a whole number, 0 or more; got {text!r}")
    return int(text)


def _offset(text: str | None, name: str) -> int | None:
    return None if text is None else _whole_number(text, name)


def _time_ms(text: str) -> int:
    """An ISO time (UTC unless it names its zone) as milliseconds since the epoch."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(
            f"from is an offset (0 or more) or an ISO time such as {TIME_EXAMPLE}; got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if moment.timestamp() < 0:
        raise BadRequest(f"from is a time after 1970-01-01T00:00:00Z; got {text!r}")
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class Row:
    """One record as the page shows it."""

    offset: int
    timestamp: str
    timestamp_type: str
    key: FieldView | None
    value: FieldView | None
    headers: tuple[tuple[str, FieldView | None], ...]
    whole: bool  # shown whole, up to WHOLE_BYTES


def row(record: Record, browse: Browse) -> Row:
    whole = browse.whole == record.offset
    limit = WHOLE_BYTES if whole else SHOWN_BYTES

    def shown(data: bytes | None, name: str) -> FieldView | None:
        return None if data is None else view(data, browse.formats[name], limit)

    return Row(
        offset=record.offset,
        timestamp=timestamp_text(record.timestamp_ms),
        timestamp_type=record.timestamp_type,
        key=shown(record.key, "key"),
        value=shown(record.value, "value"),
        headers=tuple((name, shown(value, "headers")) for name, value in record.headers),
        whole=whole,
    )


def timestamp_text(ms: int | None) -> str:
    if ms is None:
        return "none"
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


class RecordBrowser:
    """Reads a page of records for the console, a few at a time."""

    def __init__(self) -> None:
        self._turns = threading.BoundedSemaphore(READS_AT_ONCE)

    def read(
        self,
        bootstrap: str,
        settings: Mapping[str, str],
        topic: str,
        partition: int,
        browse: Browse,
    ) -> tuple[RecordPage, bool | None]:
        """The page, and for a time, whether a record at or after it was found.
        AdminError (OffsetOutOfRange, ReadDenied...) says why there is none."""
        if not self._turns.acquire(timeout=TURN_WAIT_S):
            raise AdminError("the console is reading other pages of records; try again")
        try:
            with PartitionReader(bootstrap, topic, partition, browse.isolation, settings) as reader:
                if browse.time_ms is not None:
                    return reader.from_time(browse.time_ms, browse.size)
                if browse.before is not None:
                    return reader.before(browse.before, browse.size), None
                if browse.offset is not None:
                    return reader.from_offset(browse.offset, browse.size), None
                return reader.from_start(browse.size), None
        finally:
            self._turns.release()


def browse_page(
    browser: RecordBrowser,
    bootstrap: str,
    settings: Mapping[str, str],
    viewer: Viewer | None,
    topic: str,
    partition_text: str,
    query: Mapping[str, list[str]],
) -> tuple[int, dict[str, Any]]:
    """The status and template context of the browser page of `topic`'s partition."""
    context: dict[str, Any] = {
        "topic": topic,
        "partition": partition_text,
        "browse": Browse(),
        "records_page": None,
        "rows": [],
        "time_found": None,
        "message": None,
        "links": {},
        "base": f"/topics/{quote(topic, safe='')}/partitions/{quote(partition_text, safe='')}",
        "formats": [f.value for f in Format],
        "isolation_levels": ISOLATION_LEVELS,
        "fields": FIELDS,
        "max_size": MAX_PAGE_SIZE,
        "shown_bytes": SHOWN_BYTES,
    }
    try:
        partition = _whole_number(partition_text, "the partition")
        browse = parse_browse(query)
    except BadRequest as exc:
        return 400, {**context, "message": _sentence(exc)}
    context["browse"] = browse
    if viewer is not None:
        reading = viewer.reading_settings(topic, settings)
        if reading is None:
            return 403, {**context, "message": f"User {viewer.user} may not read topic {topic}."}
        settings = reading
    try:
        page, time_found = browser.read(bootstrap, settings, topic, partition, browse)
    except OffsetOutOfRange as exc:
        return 400, {**context, "message": _sentence(exc)}
    except NoSuchPartition as exc:
        return 404, {**context, "message": _sentence(exc)}
    except ReadDenied as exc:
        who = f"User {viewer.user} is" if viewer is not None else "The console is"
        return 403, {**context, "message": f"{who} {exc}."}
    except AdminError as exc:
        return 503, {**context, "message": _sentence(exc)}
    rows = [row(record, browse) for record in page.records]
    return 200, {
        **context,
        "records_page": page,
        "rows": rows,
        "time_found": time_found,
        "links": _links(browse, page),
    }


def _sentence(exc: Exception) -> str:
    text = str(exc)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _links(browse: Browse, page: RecordPage) -> dict[str, str]:
    """The pager's links, each a query string, for those that lead somewhere."""
    blank: dict[str, Any] = {"from": None, "before": None, "whole": None}
    links = {}
    if page.start_offset > page.log_start_offset:
        links["oldest"] = browse.query(**{**blank, "from": page.log_start_offset})
        links["older"] = browse.query(**{**blank, "before": page.start_offset})
    if page.next_offset < page.end_offset:
        links["newer"] = browse.query(**{**blank, "from": page.next_offset})
        links["newest"] = browse.query(**{**blank, "before": page.end_offset})
    return links
