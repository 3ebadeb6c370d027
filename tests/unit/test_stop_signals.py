"""`durable worker` and `durable ui` stop on SIGTERM or SIGINT wherever their main
thread is when it comes (`durable.cli._signals`).

The old handler set a `threading.Event` the main thread was waiting on; a signal that
came while that thread held the event's lock hung the command for good (a CI run saw a
worker ignore SIGTERM). These tests deliver the signal at every line the wait runs, in
a child process of their own, since the handlers are process-wide.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import signal, sys
    from durable.cli import _signals

    _signals.LOOK = 0.0005  # the same lines, run more often
    for k in range(1, 80):
        stops = _signals.StopSignals()
        seen = 0

        def at_lines(frame, event, arg):
            global seen
            if event == "line":
                seen += 1
                if seen == k:  # the k-th line the wait runs: the signal comes now
                    signal.raise_signal(signal.SIGTERM)
            return at_lines

        sys.settrace(lambda frame, event, arg: at_lines)
        try:
            name = stops.wait()
        finally:
            sys.settrace(None)
        assert name == "SIGTERM", name

    again = []
    stops = _signals.StopSignals(again=again.append)
    signal.raise_signal(signal.SIGINT)
    signal.raise_signal(signal.SIGTERM)
    assert stops.wait() == "SIGINT", "the first signal is the one reported"
    assert again == ["SIGTERM"], again
    print("ok", flush=True)
    """
)


def test_a_stop_signal_at_any_line_of_the_wait_stops_it() -> None:
    """Each of 79 signals, delivered at a different line of the wait (inside the
    handler's own work too), ends it; a second signal goes to ``again``. A handler
    that takes a lock the main thread may hold hangs here: the child is killed at the
    timeout and the test fails."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
