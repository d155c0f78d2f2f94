"""Where a broker keeps ACLs, and the authorizer it keeps current from them.

One broker: every ACL in one JSON file in its data directory (`acls.json`), rewritten
atomically (temporary file, fsync, rename) before a change is answered. A cluster:
ZooKeeper, where Kafka keeps them (cluster/acl_layout.py): any broker writes a change
with conditional updates and announces it; every broker watches the announcements and
re-reads the patterns they name, so all apply a change within a fraction of a second.

Either way decisions are made from memory (security/authorizer.py), which the store
updates: at once on the broker that wrote a change, at the announcement on the others.
Changes and the re-reads of announcements go one at a time (Kafka's authorizer lock),
so a re-read never puts back what a write on this broker just replaced.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from herdless.cluster import acl_layout
from herdless.cluster.errors import ClusterError, MalformedZNode
from herdless.cluster.store import SessionState
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    by_pattern,
    check_binding,
    check_filter,
    deletion_targets,
    first_matching,
)
from herdless.security.authorizer import AclCache, Authorizer, AuthorizerSettings
from herdless.storage import StorageError, checkpoint

if TYPE_CHECKING:
    from herdless.cluster.store import ClusterStore, Watch

log = logging.getLogger(__name__)

ACLS_FILE = "acls.json"
FILE_VERSION = 1
# How long the announcement watcher waits before trying again after ZooKeeper failed it.
RETRY_S = 1.0

Entries = frozenset[AccessControlEntry]
Change = Callable[[Entries], Entries]


@dataclass(frozen=True, slots=True)
class AclFailure:
    """Why one creation, one deletion or one filter failed, as Kafka answers it."""

    error_code: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class DeletedAcl:
    binding: AclBinding
    failure: AclFailure | None = None


@dataclass(slots=True)
class FilterResult:
    """What one DeleteAcls filter removed, or why it could not be applied."""

    failure: AclFailure | None = None
    deleted: list[DeletedAcl] = field(default_factory=list)


class AclStore:
    """The ACLs, the authorizer deciding from them, and Kafka's CreateAcls and DeleteAcls
    semantics; subclasses say where changes are made durable."""

    def __init__(self, settings: AuthorizerSettings) -> None:
        self.cache = AclCache()
        self.authorizer = Authorizer(settings, self.cache)
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Read every ACL (and, in a cluster, follow changes) before serving."""

    async def stop(self) -> None:
        """Stop following changes."""

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self.cache.bindings(binding_filter)

    async def create(self, bindings: Sequence[AclBinding]) -> list[AclFailure | None]:
        """Add each binding; a failure per binding, None where it was added (or was
        there already)."""
        results: list[AclFailure | None] = [None] * len(bindings)
        valid = []
        for index, binding in enumerate(bindings):
            try:
                check_binding(binding)
            except InvalidAcl as exc:
                results[index] = AclFailure(ErrorCode.INVALID_REQUEST, str(exc))
            else:
                valid.append((index, binding))
        grouped = by_pattern(valid)
        changes: dict[ResourcePattern, Change] = {
            pattern: _adding(frozenset(entry for _, entry in added))
            for pattern, added in grouped.items()
        }
        outcomes = await self._apply(changes)
        for pattern, added in grouped.items():
            outcome = outcomes[pattern]
            if isinstance(outcome, BaseException):
                for index, _ in added:
                    results[index] = _failure(outcome)
        return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[FilterResult]:
        """Remove every ACL each filter matches; each removed ACL is reported under the
        first filter that matches it, as Kafka reports them."""
        results = [FilterResult() for _ in filters]
        valid = []
        for index, binding_filter in enumerate(filters):
            try:
                check_filter(binding_filter)
            except InvalidAcl as exc:
                results[index].failure = AclFailure(ErrorCode.INVALID_REQUEST, str(exc))
            else:
                valid.append((index, binding_filter))
        targets = deletion_targets(valid, self.cache.patterns())
        changes: dict[ResourcePattern, Change] = {
            pattern: _removing(matching) for pattern, matching in targets.items()
        }
        outcomes = await self._apply(changes)
        for pattern, matching in targets.items():
            outcome = outcomes[pattern]
            if isinstance(outcome, BaseException):
                # What this broker knew would go: reported as not deleted, with why.
                failure = _failure(outcome)
                removed = {
                    e for e in self.cache.get(pattern) if first_matching(e, matching) is not None
                }
            else:
                failure = None
                before, after = outcome
                removed = before - after
            for entry in sorted(removed, key=_entry_order):
                index = first_matching(entry, matching)
                assert index is not None
                results[index].deleted.append(DeletedAcl(AclBinding(pattern, entry), failure))
        return results

    async def _apply(
        self, changes: dict[ResourcePattern, Change]
    ) -> dict[ResourcePattern, tuple[Entries, Entries] | BaseException]:
        """Apply each change durably, then to the cache: per pattern, its ACLs before and
        after, or the exception that stopped it."""
        raise NotImplementedError


class LocalAcls(AclStore):
    """One broker: every ACL in one file, rewritten atomically on each change."""

    def __init__(self, settings: AuthorizerSettings, data_dir: Path) -> None:
        super().__init__(settings)
        self._path = Path(data_dir) / ACLS_FILE

    async def start(self) -> None:
        self.load()

    def load(self) -> None:
        """Read the file; StorageError, naming it, if it cannot be: a broker that lost
        its ACLs must not start and decide without them."""
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"cannot read {self._path}: {exc.strerror}") from None
        try:
            self.cache.replace_all(decode_file(data))
        except ValueError as exc:
            raise StorageError(
                f"{self._path} holds no ACLs herdless can read ({exc}): restore it from a"
                " backup, or remove it to start with no ACLs"
            ) from None

    async def _apply(
        self, changes: dict[ResourcePattern, Change]
    ) -> dict[ResourcePattern, tuple[Entries, Entries] | BaseException]:
        async with self._lock:
            outcomes: dict[ResourcePattern, tuple[Entries, Entries] | BaseException] = {}
            for pattern, change in changes.items():
                before = self.cache.get(pattern)
                outcomes[pattern] = (before, frozenset(change(before)))
            changed = {
                p: o[1] for p, o in outcomes.items() if isinstance(o, tuple) and o[0] != o[1]
            }
            if not changed:
                return outcomes
            everything = {p: self.cache.get(p) for p in self.cache.patterns()}
            everything.update(changed)
            try:
                await asyncio.to_thread(
                    checkpoint.atomic_write, self._path, encode_file(everything)
                )
            except OSError as exc:
                log.error("cannot write %s: %s", self._path, exc)
                return dict.fromkeys(changes, exc)
            for pattern, entries in changed.items():
                self.cache.put(pattern, entries)
            return outcomes


class ZooKeeperAcls(AclStore):
    """A cluster: ZooKeeper holds the ACLs; every broker watches for announced changes."""

    def __init__(self, settings: AuthorizerSettings, store: Callable[[], ClusterStore]) -> None:
        super().__init__(settings)
        self._store = store
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watches: list[Watch] = []
        # Per change path: the notification names last seen, and the highest sequence
        # number applied (or covered by the load at start).
        self._seen: dict[str, list[str]] = {root: [] for root in acl_layout.CHANGE_PATHS}
        self._applied: dict[str, int] = dict.fromkeys(acl_layout.CHANGE_PATHS, -1)
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        # Set when the ZooKeeper session was lost: notifications may have been purged
        # meanwhile, so everything is read again once a new session is established.
        self._reload = False

    async def start(self) -> None:
        """Watch for changes, then read every ACL: watching first leaves no moment in
        which a change could be missed (Kafka's order)."""
        self._loop = asyncio.get_running_loop()
        store = self._store()
        await zookeeper_call(store.create_acl_paths)
        for root in acl_layout.CHANGE_PATHS:
            watch = await zookeeper_call(store.watch_acl_changes, root, self._later(root))
            self._watches.append(watch)
        loop = self._loop
        self._watches.append(
            store.add_session_listener(
                lambda state: loop.call_soon_threadsafe(self._on_session, state)
            )
        )
        await self._load()
        self._worker = self._loop.create_task(self._follow())

    async def _load(self) -> None:
        # The notifications there now are of changes the load reads.
        for root, names in self._seen.items():
            self._applied[root] = max(_sequences(names), default=-1)
        async with self._lock:
            self.cache.replace_all(await zookeeper_call(self._store().all_acls))
        log.info("read %d ACL patterns from ZooKeeper", len(self.cache.patterns()))

    async def stop(self) -> None:
        for watch in self._watches:
            watch.cancel()
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)

    async def _apply(
        self, changes: dict[ResourcePattern, Change]
    ) -> dict[ResourcePattern, tuple[Entries, Entries] | BaseException]:
        outcomes: dict[ResourcePattern, tuple[Entries, Entries] | BaseException] = {}
        async with self._lock:
            for pattern, change in changes.items():
                try:
                    before, after = await zookeeper_call(
                        self._store().update_resource_acls, pattern, change
                    )
                except Exception as exc:
                    log.error("cannot change the ACLs of %s in ZooKeeper: %s", pattern, exc)
                    outcomes[pattern] = exc
                    continue
                self.cache.put(pattern, after)
                outcomes[pattern] = (before, after)
        return outcomes

    def _later(self, root: str) -> Callable[[list[str]], None]:
        """A watch callback (on kazoo's thread) that hands the names to the loop."""
        loop = self._loop
        assert loop is not None
        return lambda names: loop.call_soon_threadsafe(self._on_names, root, names)

    def _on_names(self, root: str, names: list[str]) -> None:
        self._seen[root] = names
        self._wake.set()

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            self._reload = True
        elif state is SessionState.CONNECTED and self._reload:
            self._wake.set()

    async def _follow(self) -> None:
        """Apply each new notification, in sequence order, one change path after the other."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._reload:
                try:
                    await self._load()
                except ClusterError as exc:
                    log.warning("cannot read the ACLs again (%s); trying again", exc)
                    await asyncio.sleep(RETRY_S)
                    self._wake.set()
                    continue
                self._reload = False
            for root in acl_layout.CHANGE_PATHS:
                try:
                    await self._apply_notifications(root)
                except ClusterError as exc:
                    log.warning("cannot read ACL changes under %s (%s); trying again", root, exc)
                    await asyncio.sleep(RETRY_S)
                    self._wake.set()

    async def _apply_notifications(self, root: str) -> None:
        names = self._seen[root]
        fresh = sorted(
            (seq, name)
            for seq, name in zip(_sequences(names), names, strict=True)
            if seq > self._applied[root]
        )
        if not fresh:
            return
        store = self._store()
        for seq, name in fresh:
            async with self._lock:
                try:
                    pattern = await zookeeper_call(store.acl_change, root, name)
                except MalformedZNode as exc:
                    log.error("ignoring an ACL change notification: %s", exc)
                    pattern = None
                if pattern is not None:
                    versioned = await zookeeper_call(store.resource_acls, pattern)
                    entries = versioned.value if versioned is not None else frozenset()
                    self.cache.put(pattern, entries)
                    log.info("ACLs of %s changed: now %d", pattern, len(entries))
            self._applied[root] = seq
        await zookeeper_call(store.purge_acl_changes, root, names)


def _sequences(names: list[str]) -> list[int]:
    sequences = (acl_layout.change_sequence(name) for name in names)
    return [-1 if seq is None else seq for seq in sequences]


def _adding(added: Entries) -> Change:
    return lambda before: before | added


def _removing(filters: list[tuple[int, AclBindingFilter]]) -> Change:
    return lambda before: frozenset(e for e in before if first_matching(e, filters) is None)


def _failure(exc: BaseException) -> AclFailure:
    code = getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
    return AclFailure(ErrorCode(code), str(exc) or type(exc).__name__)


def _entry_order(entry: AccessControlEntry) -> tuple[Any, ...]:
    return (entry.principal, entry.permission_type, entry.operation, entry.host)


# -- the file ----------------------------------------------------------------------------


def encode_file(acls: dict[ResourcePattern, Entries]) -> bytes:
    """Every ACL, one object per binding, in a stable order (a diff shows real changes)."""
    rows = [
        {
            "resourceType": pattern.resource_type.kafka_name,
            "patternType": pattern.pattern_type.name,
            "name": pattern.name,
            "principal": entry.principal,
            "permissionType": entry.permission_type.kafka_name,
            "operation": entry.operation.kafka_name,
            "host": entry.host,
        }
        for pattern in sorted(acls, key=lambda p: (p.resource_type, p.pattern_type, p.name))
        for entry in sorted(acls[pattern], key=_entry_order)
    ]
    return json.dumps({"version": FILE_VERSION, "acls": rows}, indent=1).encode() + b"\n"


def decode_file(data: bytes) -> dict[ResourcePattern, Entries]:
    """The file's ACLs; ValueError says what is wrong."""
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("version") != FILE_VERSION:
        raise ValueError(f"not version {FILE_VERSION} of the ACL file")
    rows = document.get("acls")
    if not isinstance(rows, list):
        raise ValueError("no list of ACLs")
    found: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for row in rows:
        if not isinstance(row, dict) or not all(isinstance(v, str) for v in row.values()):
            raise ValueError(f"not an ACL: {row!r}")
        try:
            pattern = ResourcePattern(
                ResourceType.parse(row["resourceType"]),
                row["name"],
                PatternType.parse(row["patternType"]),
            )
            entry = AccessControlEntry(
                row["principal"],
                row["host"],
                AclOperation.parse(row["operation"]),
                AclPermissionType.parse(row["permissionType"]),
            )
            check_binding(AclBinding(pattern, entry))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not an ACL ({exc}): {row!r}") from None
        found.setdefault(pattern, set()).add(entry)
    return {pattern: frozenset(entries) for pattern, entries in found.items()}
