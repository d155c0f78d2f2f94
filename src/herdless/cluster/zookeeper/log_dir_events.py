"""The znodes by which a broker tells the controller its log directory failed or writes
again (/log_dir_event_notification), as Kafka's propagateLogDirEvent writes them."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from herdless.cluster import layout
from herdless.cluster.errors import ControllerMoved
from herdless.cluster.layout import LogDirEvent, LogDirNotification
from herdless.cluster.zookeeper.session import ZooKeeperSession
from herdless.cluster.zookeeper.transactions import failed_index
from herdless.cluster.zookeeper.watches import Watch, watch_children


class LogDirEventZNodes(ZooKeeperSession):
    """Log directory events: written by brokers, handled and deleted by the controller."""

    # -- log directory events ------------------------------------------------------------

    def propagate_log_dir_event(self, broker_id: int, event: LogDirEvent) -> str:
        """Tell the controller that this broker's log directory failed or writes again: a
        persistent sequential znode, as Kafka's propagateLogDirEvent writes it; returns its
        name. One written twice (an answer lost with the connection) says the same twice."""
        prefix = layout.log_dir_event_path(layout.LOG_DIR_EVENT_PREFIX)
        data = layout.encode_log_dir_event(broker_id, event)
        path = self._run(lambda: self._client.create_async(prefix, data, sequence=True))
        return str(path).rpartition("/")[2]

    def log_dir_event_names(self) -> list[str]:
        """The names of the log directory events not yet handled, oldest first."""
        children = self._run(
            lambda: self._client.get_children_async(layout.LOG_DIR_EVENT_NOTIFICATION_PATH)
        )
        # The sequence numbers are zero-padded to one width: their text order is theirs.
        return sorted(c for c in children if c.startswith(layout.LOG_DIR_EVENT_PREFIX))

    def log_dir_event(self, name: str) -> LogDirNotification | None:
        """One log directory event; None once deleted. MalformedZNode if it is not one."""
        try:
            data, stat = self._run(lambda: self._client.get_async(layout.log_dir_event_path(name)))
        except NoNodeError:
            return None
        broker_id, event = layout.decode_log_dir_event(name, data)
        return LogDirNotification(name, broker_id, event, stat.czxid)

    def watch_log_dir_events(self, callback: Callable[[list[str]], None]) -> Watch:
        return watch_children(self._client, layout.LOG_DIR_EVENT_NOTIFICATION_PATH, callback)

    def delete_log_dir_events(self, names: list[str], controller_epoch_version: int) -> None:
        """Delete handled log directory events, in one transaction conditional on the
        controller epoch (ControllerMoved if it moved on); ones gone already are skipped."""
        remaining = list(names)
        while remaining:
            tx = self._client.transaction()
            tx.check(layout.CONTROLLER_EPOCH_PATH, controller_epoch_version)
            for name in remaining:
                tx.delete(layout.log_dir_event_path(name))
            results = self._commit(tx)
            index = failed_index(results)
            if index is None:
                return
            if index == 0:
                raise ControllerMoved("/controller_epoch moved on while deleting log dir events")
            if not isinstance(results[index], NoNodeError):
                raise results[index]
            del remaining[index - 1]  # deleted by an earlier controller
