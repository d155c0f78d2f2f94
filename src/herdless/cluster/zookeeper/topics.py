"""The znodes of topics: assignments (/brokers/topics), partition states, and deletion
(/admin/delete_topics)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TypeVar

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.protocol.states import ZnodeStat

from herdless.cluster import layout
from herdless.cluster.errors import (
    ControllerMoved,
    StateVersionConflict,
    TopicExists,
    TopicNameCollision,
    UnknownTopic,
)
from herdless.cluster.layout import PartitionState, TopicAssignment, Versioned
from herdless.cluster.zookeeper.session import ZooKeeperSession
from herdless.cluster.zookeeper.transactions import check_committed, failed_index, first_failure
from herdless.cluster.zookeeper.watches import Watch, watch_children, watch_data

T = TypeVar("T")


class TopicZNodes(ZooKeeperSession):
    """Topics, their partitions' states, and their deletion."""

    # -- topics --------------------------------------------------------------------------

    def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str]) -> int:
        """Create /config/topics/T and /brokers/topics/T in one transaction; returns the
        topic znode's version (0). The controller creates the partition states.

        Raises TopicExists if the topic exists or is marked for deletion, and
        TopicNameCollision for a name that differs from an existing one only by '.'
        versus '_'.
        """
        name = assignment.name
        if self._exists(layout.delete_topic_path(name)):
            raise TopicExists(f"Topic '{name}' is marked for deletion.")
        if "." in name or "_" in name:
            colliding = sorted(
                other
                for other in self.topic_names()
                if other != name and other.replace(".", "_") == name.replace(".", "_")
            )
            if colliding:
                raise TopicNameCollision(
                    f"Topic '{name}' collides with existing topics: {', '.join(colliding)}"
                )
        config_path = layout.topic_config_path(name)
        config_data = layout.encode_topic_config(configs)
        tx = self._client.transaction()
        # A config left behind by an unfinished deletion is overwritten, as Kafka does.
        if self._exists(config_path):
            tx.set_data(config_path, config_data)
        else:
            tx.create(config_path, config_data)
        tx.create(layout.topic_path(name), layout.encode_topic(assignment))
        failure = first_failure(self._commit(tx))
        if isinstance(failure, NodeExistsError | NoNodeError):
            if self._exists(layout.topic_path(name)):
                raise TopicExists(f"Topic '{name}' already exists.")
            raise StateVersionConflict(f"the config of topic '{name}' changed while creating it")
        if failure is not None:
            raise failure
        return 0

    def topic(self, name: str) -> Versioned[TopicAssignment] | None:
        try:
            data, stat = self._run(lambda: self._client.get_async(layout.topic_path(name)))
        except NoNodeError:
            return None
        return Versioned(layout.decode_topic(name, data), stat.version)

    def topic_names(self) -> set[str]:
        return set(self._run(lambda: self._client.get_children_async(layout.TOPICS_PATH)))

    def watch_topic_names(self, callback: Callable[[set[str]], None]) -> Watch:
        return watch_children(
            self._client, layout.TOPICS_PATH, lambda children: callback(set(children))
        )

    def watch_topic(
        self, name: str, callback: Callable[[Versioned[TopicAssignment] | None], None]
    ) -> Watch:
        """Call back with the topic's assignment whenever it changes; None once deleted."""
        return watch_data(
            self._client,
            layout.topic_path(name),
            lambda data, stat: _versioned(stat, lambda: layout.decode_topic(name, data)),
            callback,
        )

    def set_partitions(
        self,
        assignment: TopicAssignment,
        expected_version: int,
        *,
        controller_epoch_version: int | None = None,
    ) -> int:
        """Replace the topic's assignment (CreatePartitions) if the znode is still at
        expected_version; returns the new version."""
        path = layout.topic_path(assignment.name)
        stat = self._conditional_set(
            path, layout.encode_topic(assignment), expected_version, controller_epoch_version
        )
        if stat is None:
            raise UnknownTopic(f"The topic '{assignment.name}' does not exist.")
        return stat.version

    # -- partition state -----------------------------------------------------------------

    def get_partition_state(self, topic: str, partition: int) -> Versioned[PartitionState] | None:
        path = layout.partition_state_path(topic, partition)
        try:
            data, stat = self._run(lambda: self._client.get_async(path))
        except NoNodeError:
            return None
        return Versioned(layout.decode_partition_state(topic, partition, data), stat.version)

    def watch_partition_state(
        self,
        topic: str,
        partition: int,
        callback: Callable[[Versioned[PartitionState] | None], None],
    ) -> Watch:
        return watch_data(
            self._client,
            layout.partition_state_path(topic, partition),
            lambda data, stat: _versioned(
                stat, lambda: layout.decode_partition_state(topic, partition, data)
            ),
            callback,
        )

    def create_partition_states(
        self,
        topic: str,
        states: Mapping[int, PartitionState],
        controller_epoch_version: int,
    ) -> dict[int, Versioned[PartitionState]]:
        """The controller creates the first state of new partitions, all or none, if it is
        still controller. StateVersionConflict if one of them exists already."""
        self._create_parents(topic, list(states))
        tx = self._client.transaction()
        tx.check(layout.CONTROLLER_EPOCH_PATH, controller_epoch_version)
        for partition, state in states.items():
            tx.create(
                layout.partition_state_path(topic, partition),
                layout.encode_partition_state(state),
            )
        check_committed(
            self._commit(tx),
            f"creating the state of partitions of '{topic}'",
            epoch_checked=True,
        )
        return {partition: Versioned(state, 0) for partition, state in states.items()}

    def update_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        expected_version: int,
        *,
        controller_epoch_version: int | None = None,
    ) -> Versioned[PartitionState]:
        """Write a partition's state if its znode is still at expected_version and, for a
        controller's write (controller_epoch_version given), if /controller_epoch is still
        at that version. StateVersionConflict (ControllerMoved) otherwise."""
        path = layout.partition_state_path(topic, partition)
        stat = self._conditional_set(
            path, layout.encode_partition_state(state), expected_version, controller_epoch_version
        )
        if stat is None:
            raise StateVersionConflict(f"{path} does not exist")
        return Versioned(state, stat.version)

    # -- topic deletion ------------------------------------------------------------------

    def mark_for_deletion(self, name: str) -> None:
        """Ask the controller to delete the topic; marking it twice is not an error."""
        if not self._exists(layout.topic_path(name)):
            raise UnknownTopic(f"Topic `{name}` to delete does not exist")
        with suppress(NodeExistsError):
            self._run(lambda: self._client.create_async(layout.delete_topic_path(name), None))

    def pending_deletions(self) -> set[str]:
        return set(self._run(lambda: self._client.get_children_async(layout.DELETE_TOPICS_PATH)))

    def watch_pending_deletions(self, callback: Callable[[set[str]], None]) -> Watch:
        return watch_children(
            self._client, layout.DELETE_TOPICS_PATH, lambda children: callback(set(children))
        )

    def complete_deletion(self, name: str, *, controller_epoch_version: int | None = None) -> None:
        """Remove the topic's znodes, its config and its deletion mark, in one transaction
        (conditional on the controller epoch when given)."""
        for _ in range(3):
            paths = self._subtree(layout.topic_path(name))
            tx = self._client.transaction()
            if controller_epoch_version is not None:
                tx.check(layout.CONTROLLER_EPOCH_PATH, controller_epoch_version)
            for path in reversed(paths):
                tx.delete(path)
            for path in (layout.topic_config_path(name), layout.delete_topic_path(name)):
                if self._exists(path):
                    tx.delete(path)
            failure = first_failure(self._commit(tx))
            if failure is None:
                return
            if isinstance(failure, BadVersionError):
                raise ControllerMoved("/controller_epoch moved on: no longer the controller")
            if not isinstance(failure, NoNodeError | NotEmptyError):
                raise failure
        raise StateVersionConflict(f"the znodes of topic '{name}' kept changing while deleted")

    # -- internals -----------------------------------------------------------------------

    def _subtree(self, root: str) -> list[str]:
        """root and its descendants, parents before children; [] if root is gone."""
        try:
            children = self._run(lambda: self._client.get_children_async(root))
        except NoNodeError:
            return []
        paths = [root]
        for child in sorted(children):
            paths.extend(self._subtree(f"{root}/{child}"))
        return paths

    def _create_parents(self, topic: str, partitions: list[int]) -> None:
        """The data-less znodes above partition states. Kazoo's transactions cannot create
        a znode without data, so these are created one by one and without the controller
        epoch check: a stale controller can add no more than an empty znode under a topic
        that still exists, and decides nothing by it."""
        for path in [layout.partitions_path(topic)] + [
            layout.partition_path(topic, p) for p in partitions
        ]:
            try:
                self._run(lambda p=path: self._client.create_async(p, None))
            except NodeExistsError:
                pass
            except NoNodeError:
                raise UnknownTopic(f"The topic '{topic}' does not exist.") from None

    def _conditional_set(
        self,
        path: str,
        data: bytes,
        expected_version: int,
        controller_epoch_version: int | None,
    ) -> ZnodeStat | None:
        """set_data at expected_version, with the controller epoch check when given;
        None if the znode does not exist."""
        tx = self._client.transaction()
        if controller_epoch_version is not None:
            tx.check(layout.CONTROLLER_EPOCH_PATH, controller_epoch_version)
        tx.set_data(path, data, expected_version)
        results = self._commit(tx)
        if (
            isinstance(first_failure(results), NoNodeError)
            and failed_index(results) == len(results) - 1
        ):
            return None
        check_committed(
            results,
            f"writing {path} at version {expected_version}",
            epoch_checked=controller_epoch_version is not None,
        )
        return results[-1]


def _versioned(stat: ZnodeStat | None, decode: Callable[[], T]) -> Versioned[T] | None:
    return None if stat is None else Versioned(decode(), stat.version)
