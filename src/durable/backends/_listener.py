"""PostgreSQL notifications from other processes, fed into this process's hub.

One thread per backend holds a connection that LISTENs on its schema's channel and
turns each notification's payload (a topic) into a hub notification. If the
connection drops it reconnects with capped exponential backoff (never a storm), and
after reconnecting wakes every waiter, because notifications sent meanwhile are lost.
Polling stays the truth: this only shortens waits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ._connections import close_quietly
from ._hub import Hub

log = logging.getLogger("durable")


class Listener:
    """A daemon thread: LISTEN on connections from *open_*, notify *hub*. *channel* is
    an SQL expression, read on each connection: the channel is its schema's."""

    def __init__(self, open_: Callable[[], Any], hub: Hub, channel: str) -> None:
        self._open = open_
        self._hub = hub
        self._channel = channel
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="durable-listen", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        """Whether the thread runs (it does not survive a fork)."""
        return self._thread.is_alive()

    def _run(self) -> None:
        backoff = 0.1
        while not self._stopping.is_set():
            conn = None
            try:
                conn = self._open().conn
                channel = conn.execute(f"SELECT {self._channel}").fetchone()[0]
                conn.execute("LISTEN " + '"' + channel.replace('"', '""') + '"')
                self._hub.notify_all()  # whatever was sent while we were away is lost
                backoff = 0.1
                while not self._stopping.is_set():
                    for note in conn.notifies(timeout=0.5):
                        self._hub.notify(note.payload)
            except Exception as error:
                if self._stopping.is_set():
                    break
                log.warning("LISTEN connection lost (%s); reconnecting in %.1fs", error, backoff)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                if conn is not None:
                    close_quietly(conn)

    def stop(self) -> None:
        """Stop listening and wait for the thread (at most about half a second)."""
        self._stopping.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
