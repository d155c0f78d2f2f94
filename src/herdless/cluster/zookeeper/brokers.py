"""The znodes of the cluster's members: the cluster id, broker registrations
(/brokers/ids), the controller (/controller, /controller_epoch) and the blocks of
producer ids brokers reserve (/latest_producer_id_block)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from herdless.cluster import layout
from herdless.cluster.errors import BrokerIdInUse, MalformedZNode
from herdless.cluster.layout import BrokerRegistration, Versioned
from herdless.cluster.zookeeper.session import ZooKeeperSession
from herdless.cluster.zookeeper.transactions import first_failure
from herdless.cluster.zookeeper.watches import Watch, watch_children, watch_data
from herdless.storage.manager import new_topic_id

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerElection:
    """This broker became controller: the epoch it wrote and /controller_epoch's version,
    on which every later controller write is conditional."""

    epoch: int
    epoch_version: int


class BrokerZNodes(ZooKeeperSession):
    """The cluster id, the brokers, the controller and producer id blocks."""

    # -- cluster id and brokers ----------------------------------------------------------

    def cluster_id(self) -> str:
        """/cluster/id, created with a new Kafka-style id by the first broker to ask."""
        path = layout.CLUSTER_ID_PATH
        try:
            data, _ = self._run(lambda: self._client.get_async(path))
            return layout.decode_cluster_id(data)
        except NoNodeError:
            pass
        proposed = layout.kafka_uuid_str(new_topic_id())
        self._ensure_path("/cluster")
        try:
            self._run(lambda: self._client.create_async(path, layout.encode_cluster_id(proposed)))
            return proposed
        except NodeExistsError:
            data, _ = self._run(lambda: self._client.get_async(path))
            return layout.decode_cluster_id(data)

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Create this broker's ephemeral /brokers/ids/N; returns the broker epoch (the
        znode's creation zxid), as Kafka's registerBroker does.

        Raises BrokerIdInUse when another live session holds the id. A znode left by this
        store's own earlier, expired session is replaced (ZooKeeper can be late removing
        it); one this session already created is kept, with its data brought up to date.
        """
        path = layout.broker_path(registration.broker_id)
        data = layout.encode_broker(registration, self._wall_ms())
        for _ in range(3):
            try:
                _, stat = self._run(
                    lambda: self._client.create_async(path, data, ephemeral=True, include_data=True)
                )
                self._registered_session = self.session_id
                return stat.czxid
            except NodeExistsError:
                pass
            try:
                existing, stat = self._run(lambda: self._client.get_async(path))
            except NoNodeError:
                continue
            owner, version = stat.ephemeralOwner, stat.version
            if owner == self.session_id:
                self._run(lambda v=version: self._client.set_async(path, data, v))
                self._registered_session = owner
                return stat.czxid
            if owner == self._registered_session:
                logger.info("replacing %s left by this broker's expired session %#x", path, owner)
                with suppress(NoNodeError, BadVersionError):
                    self._run(lambda v=version: self._client.delete_async(path, v))
                continue
            raise BrokerIdInUse(
                f"broker id {registration.broker_id} is already registered by a live broker "
                f"at {_address_of(registration.broker_id, existing)}"
            )
        raise BrokerIdInUse(f"broker id {registration.broker_id}: {path} keeps changing")

    def live_brokers(self) -> dict[int, BrokerRegistration]:
        """The registered brokers by id; a broker whose session just ended may be missing."""
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id in self._broker_ids():
            try:
                data, _ = self._run(
                    lambda b=broker_id: self._client.get_async(layout.broker_path(b))
                )
            except NoNodeError:
                continue
            brokers[broker_id] = layout.decode_broker(broker_id, data)
        return brokers

    def broker_epochs(self) -> dict[int, int]:
        """The registered brokers' epochs by id: the zxid that created each registration,
        as Kafka's broker epoch is; a broker whose session just ended may be missing."""
        epochs: dict[int, int] = {}
        for broker_id in self._broker_ids():
            stat = self._run(lambda b=broker_id: self._client.exists_async(layout.broker_path(b)))
            if stat is not None:
                epochs[broker_id] = stat.czxid
        return epochs

    def watch_brokers(self, callback: Callable[[list[int]], None]) -> Watch:
        """Call back with the sorted ids of the registered brokers whenever they change."""
        return watch_children(
            self._client, layout.BROKER_IDS_PATH, lambda children: callback(_broker_ids(children))
        )

    # -- controller ----------------------------------------------------------------------

    def try_elect_controller(self, broker_id: int) -> ControllerElection | None:
        """Become controller: create the ephemeral /controller and increment
        /controller_epoch in one transaction, conditional on the epoch read. None when
        another broker is controller (or won the race)."""
        current = self.controller_epoch()
        if current is None:
            with suppress(NodeExistsError):
                self._run(
                    lambda: self._client.create_async(
                        layout.CONTROLLER_EPOCH_PATH,
                        layout.encode_controller_epoch(layout.INITIAL_CONTROLLER_EPOCH),
                    )
                )
            current = self.controller_epoch()
            if current is None:
                raise MalformedZNode(layout.CONTROLLER_EPOCH_PATH, "vanished while read")
        epoch = current.value + 1
        tx = self._client.transaction()
        tx.create(
            layout.CONTROLLER_PATH,
            layout.encode_controller(broker_id, self._wall_ms()),
            ephemeral=True,
        )
        tx.set_data(
            layout.CONTROLLER_EPOCH_PATH, layout.encode_controller_epoch(epoch), current.version
        )
        results = self._commit(tx)
        failure = first_failure(results)
        if failure is None:
            stat = results[1]
            return ControllerElection(epoch, stat.version)
        if not isinstance(failure, NodeExistsError | BadVersionError):
            raise failure
        # As Kafka does: the transaction may have committed before a lost connection hid
        # the answer; it did if /controller is ours and the epoch is the one we wrote.
        if self.controller_id() == broker_id:
            now = self.controller_epoch()
            if now is not None and now.value == epoch:
                return ControllerElection(epoch, now.version)
        return None

    def controller_id(self) -> int | None:
        try:
            data, _ = self._run(lambda: self._client.get_async(layout.CONTROLLER_PATH))
        except NoNodeError:
            return None
        return layout.decode_controller(data)

    def controller_epoch(self) -> Versioned[int] | None:
        try:
            data, stat = self._run(lambda: self._client.get_async(layout.CONTROLLER_EPOCH_PATH))
        except NoNodeError:
            return None
        return Versioned(layout.decode_controller_epoch(data), stat.version)

    def resign_controller(self, election: ControllerElection) -> None:
        """Delete /controller if this election still holds it, so that another broker can
        take over without waiting for this session to expire."""
        tx = self._client.transaction()
        tx.check(layout.CONTROLLER_EPOCH_PATH, election.epoch_version)
        tx.delete(layout.CONTROLLER_PATH)
        failure = first_failure(self._commit(tx))
        if failure is not None and not isinstance(failure, BadVersionError | NoNodeError):
            raise failure

    def watch_controller(self, callback: Callable[[int | None], None]) -> Watch:
        """Call back with the controller's broker id, or None while there is none."""
        return watch_data(
            self._client,
            layout.CONTROLLER_PATH,
            lambda data, _stat: None if data is None else layout.decode_controller(data),
            callback,
        )

    # -- producer ids ------------------------------------------------------------------

    def reserve_producer_id_block(self, broker_id: int, size: int) -> tuple[int, int]:
        """Reserve the next `size` producer ids for this broker, as Kafka's ZooKeeper-era
        brokers do; returns (first id, id past the last). Never the same block twice:
        each reservation is a write conditional on the version of the one before."""
        path = layout.PRODUCER_ID_BLOCK_PATH
        while True:
            try:
                data, stat = self._run(lambda: self._client.get_async(path))
            except NoNodeError:
                data, stat = None, None
            start = layout.decode_producer_id_block_end(data) + 1
            value = layout.encode_producer_id_block(broker_id, start, start + size - 1)
            try:
                if stat is None:
                    self._run(lambda value=value: self._client.create_async(path, value))
                else:
                    version = stat.version
                    self._run(
                        lambda value=value, version=version: self._client.set_async(
                            path, value, version
                        )
                    )
            except (NodeExistsError, BadVersionError):
                continue  # another broker reserved a block meanwhile: take the next one
            return start, start + size

    def _broker_ids(self) -> list[int]:
        children = self._run(lambda: self._client.get_children_async(layout.BROKER_IDS_PATH))
        return _broker_ids(children)


def _broker_ids(children: list[str]) -> list[int]:
    return sorted(int(child) for child in children if child.isascii() and child.isdigit())


def _address_of(broker_id: int, data: bytes | None) -> str:
    try:
        registration = layout.decode_broker(broker_id, data)
    except MalformedZNode:
        return "an unknown address"
    return f"{registration.host}:{registration.port}"
