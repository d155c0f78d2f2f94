"""The broker's settings in force: the static ones (file, --set, options) with the
cluster-wide dynamic defaults over them and this broker's own dynamic configs over
those, as Kafka's DynamicBrokerConfig stacks them; and the parts a change reaches.

A change is checked whole before it is stored: the settings it would give must pass
BrokerConfig.validate and every reconfigurable it reaches (a keystore must load), so a
stored config is one every broker can apply. One read back from the store that cannot
be applied all the same (written by another tool) is logged and leaves the settings as
they were, as Kafka's brokers do.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Protocol

from herdless.broker.config import BrokerConfig, ConfigError
from herdless.broker.dynamic_config.rules import DEFAULT_ENTITY

log = logging.getLogger(__name__)


class Reconfigurable(Protocol):
    """A part of the broker that takes some dynamic configs at once (Kafka's
    BrokerReconfigurable)."""

    def reconfigures(self, name: str) -> bool:
        """Whether a change of `name` reaches this part."""
        ...

    def validate(self, new: BrokerConfig) -> None:
        """ConfigError if `new` cannot be taken (before anything is stored)."""
        ...

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None: ...


def entity_path(broker: int | None) -> str:
    """A broker's configs below /config (brokers/1), or the cluster-wide default's."""
    return f"brokers/{DEFAULT_ENTITY if broker is None else broker}"


def effective(
    static: BrokerConfig, defaults: Mapping[str, str], own: Mapping[str, str]
) -> BrokerConfig:
    """The settings in force; ConfigError if these levels cannot be used together."""
    config = copy.deepcopy(static)
    config.apply_properties({**defaults, **own})
    config.validate()
    return config


class DynamicBrokerConfig:
    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.current = static
        # The cluster-wide dynamic defaults and this broker's own, as stored.
        self.defaults: dict[str, str] = {}
        self.own: dict[str, str] = {}
        self._reconfigurables: list[Reconfigurable] = []

    @property
    def node_id(self) -> int:
        return self.static.node_id

    def add_reconfigurable(self, reconfigurable: Reconfigurable) -> None:
        self._reconfigurables.append(reconfigurable)

    def layer(self, per_broker: bool) -> dict[str, str]:
        return dict(self.own if per_broker else self.defaults)

    def check(self, per_broker: bool, layer: Mapping[str, str]) -> None:
        """ConfigError if storing `layer` at this level would give settings that cannot
        be used here."""
        defaults, own = (self.defaults, layer) if per_broker else (layer, self.own)
        new = effective(self.static, defaults, own)
        changed = _changed({**self.defaults, **self.own}, {**defaults, **own})
        for reconfigurable in self._reconfigurables:
            if any(reconfigurable.reconfigures(name) for name in changed):
                reconfigurable.validate(new)

    def apply(self, path: str, config: Mapping[str, str]) -> None:
        """An entity's configs as stored now (the store's listener): this broker's own and
        the cluster-wide defaults are taken, other brokers' left alone."""
        if path == entity_path(None):
            self._update(dict(config), self.own)
        elif path == entity_path(self.node_id):
            self._update(self.defaults, dict(config))

    def _update(self, defaults: dict[str, str], own: dict[str, str]) -> None:
        try:
            new = effective(self.static, defaults, own)
        except ConfigError as exc:
            log.error("dynamic broker configs not applied, the previous stay: %s", exc)
            return
        changed = _changed({**self.defaults, **self.own}, {**defaults, **own})
        old, self.current = self.current, new
        self.defaults, self.own = defaults, own
        if changed:
            log.info("dynamic broker configs changed: %s", ", ".join(sorted(changed)))
        for reconfigurable in self._reconfigurables:
            if any(reconfigurable.reconfigures(name) for name in changed):
                try:
                    reconfigurable.reconfigure(old, new)
                except Exception:
                    log.exception("dynamic broker configs not applied by %r", reconfigurable)


def _changed(before: Mapping[str, str], after: Mapping[str, str]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
