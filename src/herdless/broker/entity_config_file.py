"""Entity configs that a cluster keeps in ZooKeeper below /config, kept by one broker
alone in a JSON file of its data directory instead.

Each kind of entity has its file: client quotas, client-metrics subscriptions, dynamic
broker configs, users' SCRAM credentials. Every file is one document,
`{"version": 1, "<key>": {<entity>: {<name>: <value>}}}`, replaced atomically on every
change; the key and the file's name are those each kind has always used, so data
directories written before still load.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

from herdless.storage import StorageError, checkpoint
from herdless.storage.manager import lock_data_dir

FILE_VERSION = 1

# An entity's config as it is to become, from the one stored ({} when there is none);
# what it raises propagates with nothing written. {} deletes the entity.
Change = Callable[[dict[str, str]], dict[str, str]]


class EntityConfigFile:
    """One kind of entity's configs in a data directory's file."""

    def __init__(
        self,
        file_name: str,
        key: str,
        what: str,
        *,
        mode: int | None = None,
        indent: int | None = None,
    ) -> None:
        """`key`: the document's key for the entities; `what`: how messages name the
        file, with its article ("a client metrics" file); `mode`: exact permissions
        (0o600 for a file that may hold secrets), else the umask's; `indent`: as the
        file has always been written."""
        self.file_name = file_name
        self._key = key
        self._what = what
        self._mode = mode
        self._indent = indent

    def read(self, data_dir: Path) -> dict[str, dict[str, str]]:
        """Every entity's config; {} if there is no file. StorageError, naming the file,
        if it cannot be read or is not one of ours."""
        path = Path(data_dir) / self.file_name
        try:
            document = json.loads(path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read {path}: {exc}") from None
        entities = document.get(self._key) if isinstance(document, dict) else None
        if (
            not isinstance(document, dict)
            or document.get("version") != FILE_VERSION
            or not isinstance(entities, dict)
            or not all(
                isinstance(config, dict) and all(isinstance(v, str) for v in config.values())
                for config in entities.values()
            )
        ):
            raise StorageError(f"{path} is not {self._what} file of version {FILE_VERSION}")
        return entities

    def alter(self, data_dir: Path, entity: str, change: Change) -> dict[str, str]:
        """Change one entity's config; the config as written. Blocks (fsync): from a
        worker thread on a broker, and one change at a time."""
        entities = self.read(data_dir)
        config = change(dict(entities.get(entity, {})))
        if config:
            entities[entity] = config
        else:
            entities.pop(entity, None)
        document = {"version": FILE_VERSION, self._key: dict(sorted(entities.items()))}
        data = json.dumps(document, indent=self._indent).encode()
        checkpoint.atomic_write(Path(data_dir) / self.file_name, data, mode=self._mode)
        return config

    def alter_offline(self, data_dir: Path, entity: str, change: Change) -> dict[str, str]:
        """alter while no broker runs on the directory: it takes the broker's lock, so
        StorageError if a broker (which would not see the change) holds it."""
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = lock_data_dir(data_dir)
        try:
            return self.alter(data_dir, entity, change)
        finally:
            os.close(fd)


class LocalEntityConfigs:
    """One broker: one kind of entity's configs in its data directory, each config as
    stored handed to `apply` at load and after every change."""

    def __init__(
        self,
        file: EntityConfigFile,
        data_dir: Path,
        apply: Callable[[str, dict[str, str]], None],
    ) -> None:
        self._file = file
        self._data_dir = Path(data_dir)
        self._apply = apply
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Read the file; StorageError if it is unreadable."""
        for entity, config in self._file.read(self._data_dir).items():
            self._apply(entity, config)

    async def alter(self, entity: str, change: Change) -> None:
        """Apply `change` durably, then here. What `change` raises propagates, with
        nothing written."""
        async with self._lock:
            config = await asyncio.to_thread(self._file.alter, self._data_dir, entity, change)
            self._apply(entity, config)
