"""Where a broker keeps consumer groups' configs (KIP-848 group configs): where it keeps
topic configs. One broker: a JSON file in its data directory beside topics.json.
A cluster: ZooKeeper, `/config/groups/<group>` beside `/config/topics/<topic>`, in
the same format, every broker watching it.

Either way the coordinator reads them from memory (coordinator/group_config.py),
which the store keeps up to date: at once on the broker that wrote a change, at
its watch on the others.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from herdless.cluster.store import Watch
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.coordinator.group_config import GroupConfigs
from herdless.storage import checkpoint

if TYPE_CHECKING:
    from herdless.cluster.store import ClusterStore

log = logging.getLogger(__name__)

GROUP_CONFIGS_FILE = "group-configs.json"


class GroupConfigStore(Protocol):
    configs: GroupConfigs

    async def store(self, group_id: str, explicit: Mapping[str, str]) -> None:
        """Make `explicit` the group's configs, durably, then in memory."""
        ...


class LocalGroupConfigs:
    """One broker: every group's explicit configs in one file, rewritten atomically."""

    def __init__(self, data_dir: Path, configs: GroupConfigs) -> None:
        self.configs = configs
        self._path = Path(data_dir) / GROUP_CONFIGS_FILE
        self._lock = asyncio.Lock()

    def load(self) -> None:
        try:
            document = json.loads(self._path.read_bytes())
        except FileNotFoundError:
            return
        groups = document.get("groups", {}) if isinstance(document, dict) else {}
        self.configs.replace_all(
            {
                group: {k: v for k, v in configs.items() if isinstance(v, str)}
                for group, configs in groups.items()
                if isinstance(configs, dict)
            }
        )

    async def store(self, group_id: str, explicit: Mapping[str, str]) -> None:
        async with self._lock:
            groups = self.configs.all()
            if explicit:
                groups[group_id] = dict(explicit)
            else:
                groups.pop(group_id, None)
            data = json.dumps({"version": 1, "groups": groups}, sort_keys=True).encode()
            await asyncio.to_thread(checkpoint.atomic_write, self._path, data)
            self.configs.put(group_id, explicit)


class ZooKeeperGroupConfigs:
    """A cluster: ZooKeeper holds them; each broker watches the groups' znodes."""

    def __init__(self, store: Callable[[], ClusterStore], configs: GroupConfigs) -> None:
        self.configs = configs
        self._store = store
        self._watches: dict[str, Watch] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Watch every group's configs, from now on (once connected to ZooKeeper)."""
        self._loop = asyncio.get_running_loop()
        store = self._store()
        await zookeeper_call(store.watch_group_configs, self._later(self._on_groups))

    async def store(self, group_id: str, explicit: Mapping[str, str]) -> None:
        await zookeeper_call(self._store().set_group_config, group_id, dict(explicit))
        self.configs.put(group_id, explicit)

    def _later(self, apply: Callable[..., None]) -> Callable[..., None]:
        """A watch callback (on kazoo's thread) that applies its change on the loop."""
        loop = self._loop
        assert loop is not None
        return lambda *args: loop.call_soon_threadsafe(apply, *args)

    def _on_groups(self, groups: set[str]) -> None:
        for group in groups - self._watches.keys():
            self._watches[group] = Watch()  # a placeholder until the watch is set
            job = asyncio.get_running_loop().create_task(self._watch(group))
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)
        for group in self._watches.keys() - groups:
            self._watches.pop(group).cancel()
            self.configs.put(group, {})

    async def _watch(self, group: str) -> None:
        try:
            watch = await zookeeper_call(
                self._store().watch_group_config,
                group,
                self._later(lambda configs: self._on_config(group, configs)),
            )
        except Exception:
            log.exception("cannot watch the configs of group %s", group)
            return
        if group in self._watches:
            self._watches[group] = watch
        else:
            watch.cancel()

    def _on_config(self, group: str, configs: dict[str, str]) -> None:
        if group in self._watches:
            self.configs.put(group, configs)
