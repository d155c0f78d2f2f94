"""Blocking ZooKeeper calls, run off the event loop in threads that never hold up an exit.

kazoo's calls block (and setting a watch retries for as long as ZooKeeper is away),
so they cannot run on the loop. asyncio.to_thread would run them in the default
executor, whose threads the interpreter joins at exit: one call stuck on an
unreachable ZooKeeper would then keep a stopping broker from exiting after its
logs are closed. Each call gets a daemon thread of its own instead; they are few
(watches, ISR changes, lease renewals), never on the produce or fetch path.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def zookeeper_call(function: Callable[..., T], *args: Any) -> T:
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if answer.done():
            return  # the caller was cancelled meanwhile
        if ok:
            answer.set_result(value)
        else:
            answer.set_exception(value)

    def run() -> None:
        try:
            result = function(*args)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome = (False, exc)
        else:
            outcome = (True, result)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name="zookeeper-call", daemon=True).start()
    return await answer
