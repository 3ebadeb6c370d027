"""How a long-running command (`durable worker`, `durable ui`) learns it must stop.

Python runs a signal handler in the main thread between two bytecodes, wherever that
thread is, including inside a lock it holds. A handler that takes a lock, as
`threading.Event.set` does, can then wait forever for its own thread: `durable worker`
could hang on SIGTERM that way, its main thread inside ``Event.wait`` between taking the
event's lock and waiting on it (the old form hangs under the test in
tests/unit/test_stop_signals.py; a CI run saw a worker not stop within 60 s of
SIGTERM). So the handlers here take no lock: they append to a list, and the main thread
looks at the list every `LOOK` seconds.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from types import FrameType

#: How often the waiting main thread looks for a signal (the delay before it stops).
LOOK = 0.1


class StopSignals:
    """SIGTERM and SIGINT, caught from construction on; `wait` blocks until one came.

    *again*, if given, is called with the signal's name when one comes after the
    first, inside the handler: it must not take locks either (``os._exit`` is fine).
    """

    def __init__(self, again: Callable[[str], object] | None = None) -> None:
        self._again = again
        self._received: list[str] = []
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._received and self._again is not None:
            self._again(name)
        self._received.append(name)  # atomic, and no lock

    def wait(self) -> str:
        """Block until a stop signal came; return its name (``SIGTERM``, ``SIGINT``)."""
        while not self._received:
            time.sleep(LOOK)  # a signal cuts it short only to run the handler
        return self._received[0]
