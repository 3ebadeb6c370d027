"""The in-process wake-up hub: bounded memory, and never a missed notification."""

from __future__ import annotations

import asyncio
import threading
import time

from durable.backends._hub import ANY, MAX_TOPICS, Hub


def test_the_hub_forgets_old_topics() -> None:
    """However many topics are notified (one per run, through LISTEN), a hub remembers
    at most twice MAX_TOPICS of them."""
    hub = Hub()
    for i in range(5 * MAX_TOPICS):
        hub.notify(f"run:{i}")
    assert len(hub._versions) <= 2 * MAX_TOPICS
    assert "run:0" not in hub._versions and f"run:{5 * MAX_TOPICS - 1}" in hub._versions


def test_forgetting_a_topic_never_hides_its_change() -> None:
    """A watch made before its topic was notified and then forgotten still wakes."""
    hub = Hub()
    watch = hub.watch(["run:mine"])
    quiet = hub.watch(["run:other"])
    assert not quiet.wait(0)
    hub.notify("run:mine")
    for i in range(2 * MAX_TOPICS):
        hub.notify(f"run:{i}")
    assert "run:mine" not in hub._versions, "forgotten by now"
    assert watch.wait(0), "the notification before forgetting is not lost"
    assert not watch.wait(0), "and it is reported once"


def test_a_topic_notified_again_is_remembered_longer() -> None:
    """Forgetting goes by the last notification, not the first."""
    hub = Hub()
    hub.notify("run:busy")
    for i in range(2 * MAX_TOPICS - 1):
        hub.notify(f"run:{i}")
        if i % 1000 == 0:
            hub.notify("run:busy")
    hub.notify("run:last")  # past the bound: the oldest half is forgotten
    assert "run:busy" in hub._versions
    assert "run:0" not in hub._versions


def test_a_poke_ends_one_wait() -> None:
    """A poke ends the watch's next wait (made before it, or after), and only that one:
    a worker's claim loop woken by its own run's end does not spin."""
    hub = Hub()
    watch = hub.watch(["queue:q"])
    other = hub.watch(["queue:q"])
    watch.poke()
    assert watch.wait(0), "a poke made before the wait ends it"
    assert not watch.wait(0), "and is spent by it"
    assert not other.wait(0), "another watch of the same topics is not poked"


def test_a_watch_on_any_hears_every_topic() -> None:
    """The ``*`` topic (the dashboard's live updates) moves with every notification and
    with notify_all, and is never forgotten however many topics pass."""
    hub = Hub()
    watch = hub.watch([ANY])
    assert not watch.wait(0)
    hub.notify("run:one")
    assert watch.wait(0) and not watch.wait(0)
    hub.notify_all()
    assert watch.wait(0)
    for i in range(3 * MAX_TOPICS):
        hub.notify(f"queue:{i}")
    assert ANY in hub._versions and watch.wait(0)


def test_an_awaited_wait_is_woken_from_another_thread() -> None:
    """`Watch.wait_async` returns as soon as another thread notifies one of its topics
    (not at its timeout), ignores other topics, reports a change made before it began,
    and times out quietly; no waker is left behind on the hub."""
    hub = Hub()
    watch = hub.watch(["run:mine"])

    async def main() -> list[tuple[bool, float]]:
        loop = asyncio.get_running_loop()
        results = []
        loop.call_later(0.05, lambda: threading.Thread(target=hub.notify, args=["run:x"]).start())
        loop.call_later(0.1, lambda: threading.Thread(target=hub.notify, args=["run:mine"]).start())
        for timeout in (5.0, 0.05):
            started = time.monotonic()
            results.append((await watch.wait_async(timeout), time.monotonic() - started))
        hub.notify("run:mine")
        started = time.monotonic()
        results.append((await watch.wait_async(5.0), time.monotonic() - started))
        watch.poke()
        results.append((await watch.wait_async(5.0), 0.0))
        return results

    (woken, took), (quiet, _), (early, at_once), (poked, _) = asyncio.run(main())
    assert woken and 0.08 < took < 2, f"woken after {took:.3f} s by its topic"
    assert not quiet, "nothing changed: the wait times out saying so"
    assert early and at_once < 0.5, "a change before the wait is not lost"
    assert poked, "a poke ends the wait"
    assert not hub._wakers
