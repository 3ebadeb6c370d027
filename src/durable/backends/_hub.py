"""Wake-ups inside one process: waiters on a topic return early when it is notified.

Polling the database is the truth; notifications only shorten the wait. A topic is a
string such as ``run:<id>`` (a run changed: it finished, was cancelled...) or
``queue:<name>`` (a run became claimable there). Backends notify their own hub when
they change something; PostgreSQL also feeds it from LISTEN, so notifications from
other processes arrive too.

A `Watch` remembers each topic's version when it is made, so a notification that
lands between "check the database" and "wait" is never missed. A thread waits on the
hub's condition (`Watch.wait`); a coroutine awaits on its own loop (`Watch.wait_async`),
which a notification from any thread wakes through the loop, holding no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Callable, Sequence

#: The most recently notified topics a hub remembers (it may hold up to twice this).
MAX_TOPICS = 10_000
#: A topic notified with every other one: a watch on it hears any change (the
#: dashboard's live updates, `durable.web._live`).
ANY = "*"


class Hub:
    """Per-topic version counters and one condition to wait on."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._versions: dict[str, int] = {}  # least recently notified first
        self._epoch = 0  # bumped by notify_all: every topic counts as changed
        #: the coroutines' waits (`Watch.wait_async`): each called at every notification
        #: with the condition held, and waking its loop if its topics changed.
        self._wakers: set[Callable[[], None]] = set()

    def notify(self, topic: str) -> None:
        """Mark *topic* changed and wake its waiters."""
        with self._condition:
            self._versions[topic] = self._versions.pop(topic, 0) + 1
            self._versions[ANY] = self._versions.pop(ANY, 0) + 1
            if len(self._versions) > 2 * MAX_TOPICS:
                self._forget_oldest()
            self._wake()

    def _forget_oldest(self) -> None:
        # Through LISTEN every process hears every run's topic: remembering them all,
        # a worker grew by 140 bytes per run ever finished (benchmarks/soak.py). A
        # forgotten topic reads as version 0 again, which could hide a change from a
        # watch made before; so forgetting counts as a change of every topic (one
        # spurious wake-up per MAX_TOPICS notifications: waiters re-read the database).
        stale = len(self._versions) - MAX_TOPICS
        for topic in list(itertools.islice(self._versions, stale)):
            del self._versions[topic]
        self._epoch += 1

    def notify_all(self) -> None:
        """Wake every waiter (after a lost connection, anything may have changed)."""
        with self._condition:
            self._epoch += 1
            self._wake()

    def _wake(self) -> None:
        """Wake the threads and the coroutines waiting (with the condition held)."""
        self._condition.notify_all()
        for wake in list(self._wakers):
            wake()

    def _snapshot(self, topics: Sequence[str]) -> tuple[int, tuple[int, ...]]:
        return self._epoch, tuple(self._versions.get(t, 0) for t in topics)

    def watch(self, topics: Sequence[str], *, cap: float | None = None) -> Watch:
        """Start watching *topics*; *cap* bounds every wait (for backends that must poll)."""
        with self._condition:
            return Watch(self, tuple(topics), self._snapshot(topics), cap)


class Watch:
    """Waits for changes to some topics, never missing one made since the last wait."""

    def __init__(
        self,
        hub: Hub,
        topics: tuple[str, ...],
        seen: tuple[int, tuple[int, ...]],
        cap: float | None,
    ) -> None:
        self._hub = hub
        self._topics = topics
        self._seen = seen
        self._cap = cap
        self._poked = False

    def poke(self) -> None:
        """Wake this watch's wait now (its owner has news of its own)."""
        with self._hub._condition:
            self._poked = True
            self._hub._wake()

    def wait(self, timeout: float) -> bool:
        """Block until a watched topic changes or *timeout* (capped) passes.

        Returns:
            True if a change was notified since the previous wait (or the watch began).
        """
        if self._cap is not None:
            timeout = min(timeout, self._cap)
        hub = self._hub
        with hub._condition:
            changed = hub._condition.wait_for(self._changed, max(timeout, 0.0))
            self._seen = hub._snapshot(self._topics)
            self._poked = False
        return changed

    async def wait_async(self, timeout: float) -> bool:
        """`wait` for a coroutine on an asyncio loop, which holds no thread meanwhile: a
        notification or `poke` from any thread wakes it through its loop."""
        if self._cap is not None:
            timeout = min(timeout, self._cap)
        hub = self._hub
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:  # with the hub's condition held
            if self._changed():
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                    loop.call_soon_threadsafe(woken.set)

        with hub._condition:
            waiting = not self._changed()
            if waiting:
                hub._wakers.add(wake)
        if waiting:
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), max(timeout, 0.0))
            finally:
                with hub._condition:
                    hub._wakers.discard(wake)
        with hub._condition:
            changed = self._changed()
            self._seen = hub._snapshot(self._topics)
            self._poked = False
        return changed

    def _changed(self) -> bool:
        """Poked, or a watched topic changed since the last wait (condition held)."""
        return self._poked or self._hub._snapshot(self._topics) != self._seen
