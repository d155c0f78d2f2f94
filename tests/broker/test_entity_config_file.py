"""The data directory's files of entity configs: the layouts written before load, a
change keeps each file's layout and permissions, and a file not ours is a StorageError
that names it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from herdless.broker.auth.credential_store import CREDENTIALS
from herdless.broker.dynamic_config.store import DYNAMIC_CONFIGS
from herdless.broker.quotas.store import QUOTAS
from herdless.broker.telemetry.store import CLIENT_METRICS
from herdless.storage import StorageError
from herdless.storage.manager import lock_data_dir


def test_each_file_keeps_its_name_key_and_layout(tmp_path: Path) -> None:
    QUOTAS.alter(tmp_path, "clients/app", lambda _: {"producer_byte_rate": "1024.0"})
    CLIENT_METRICS.alter(tmp_path, "cpu", lambda _: {"metrics": "cpu"})
    DYNAMIC_CONFIGS.alter(tmp_path, "brokers/<default>", lambda _: {"log.cleaner.threads": "2"})
    CREDENTIALS.alter(tmp_path, "alice", lambda _: {"SCRAM-SHA-256": "s=..."})

    assert json.loads((tmp_path / "client-quotas.json").read_text()) == {
        "version": 1,
        "entities": {"clients/app": {"producer_byte_rate": "1024.0"}},
    }
    assert json.loads((tmp_path / "client-metrics.json").read_text()) == {
        "version": 1,
        "subscriptions": {"cpu": {"metrics": "cpu"}},
    }
    assert json.loads((tmp_path / "dynamic-broker-configs.json").read_text()) == {
        "version": 1,
        "entities": {"brokers/<default>": {"log.cleaner.threads": "2"}},
    }
    credentials = (tmp_path / "scram-credentials.json").read_text()
    assert credentials == json.dumps(
        {"version": 1, "users": {"alice": {"SCRAM-SHA-256": "s=..."}}}, indent=1
    )
    # Secrets, or configs that may hold them, are the broker's user's alone.
    for name in ("client-quotas.json", "dynamic-broker-configs.json", "scram-credentials.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


def test_a_change_sees_the_stored_config_and_an_empty_one_deletes(tmp_path: Path) -> None:
    QUOTAS.alter(tmp_path, "users/bob", lambda _: {"a": "1"})
    QUOTAS.alter(tmp_path, "clients/c", lambda _: {"b": "2"})
    assert QUOTAS.alter(tmp_path, "users/bob", lambda c: {**c, "x": "3"}) == {"a": "1", "x": "3"}
    assert QUOTAS.alter(tmp_path, "clients/c", lambda _: {}) == {}
    assert QUOTAS.read(tmp_path) == {"users/bob": {"a": "1", "x": "3"}}


def test_a_change_that_raises_writes_nothing(tmp_path: Path) -> None:
    CLIENT_METRICS.alter(tmp_path, "s", lambda _: {"metrics": "cpu"})

    def refuse(config: dict[str, str]) -> dict[str, str]:
        raise ValueError("no")

    with pytest.raises(ValueError):
        CLIENT_METRICS.alter(tmp_path, "s", refuse)
    assert CLIENT_METRICS.read(tmp_path) == {"s": {"metrics": "cpu"}}


def test_no_file_is_no_entity(tmp_path: Path) -> None:
    assert QUOTAS.read(tmp_path) == {}


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[]",
        b'{"version": 2, "subscriptions": {}}',
        b'{"version": 1, "entities": {}}',
        b'{"version": 1, "subscriptions": {"s": {"metrics": 1}}}',
        b'{"version": 1, "subscriptions": {"s": []}}',
    ],
)
def test_a_file_not_ours_is_a_storage_error_naming_it(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "client-metrics.json").write_bytes(content)
    with pytest.raises(StorageError, match="client-metrics.json"):
        CLIENT_METRICS.read(tmp_path)


def test_offline_changes_wait_for_no_broker(tmp_path: Path) -> None:
    QUOTAS.alter_offline(tmp_path / "new", "clients/app", lambda _: {"a": "1"})
    assert QUOTAS.read(tmp_path / "new") == {"clients/app": {"a": "1"}}

    fd = lock_data_dir(tmp_path)
    try:
        with pytest.raises(StorageError):
            QUOTAS.alter_offline(tmp_path, "clients/app", lambda _: {"a": "1"})
    finally:
        os.close(fd)
