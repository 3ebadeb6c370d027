"""Fault points: the places where chaos tests make durable fail on purpose.

Every point is inert (one falsy check) until armed, by a test hook
(`durable.testing.arm_fault`) or, for worker subprocesses, by the environment::

    DURABLE_FAULTS="before_task=exit"
    DURABLE_FAULTS='[{"point": "checkpoint_lost_ack", "action": "raise", "match": "sleep"}]'

The short form is ``point=action`` pairs separated by commas; the JSON form adds
``match`` (a substring of the subject: the step's ``kind:name``, or the run id after a
claim) and ``nth`` (fire at the nth matching hit; default 1). Each armed fault fires
once. Points:

========================  =============================================================
``after_claim``           a worker claimed a run; nothing of it has executed yet
``before_task``           a task body is about to run
``after_task``            a task body returned; its result is not recorded yet
``before_checkpoint``     a step (any kind of durable call) is about to be recorded
``checkpoint_lost_ack``   a step's write committed, then the driver failed (SQL only)
``before_complete``       the workflow returned; its outcome is not recorded yet
``dispatch_lost_ack``     a new run's insert committed, then the driver failed (SQL only)
``before_continue``       a run called continue_as_new(); the hand-over is not committed
``after_continue``        the hand-over committed (the run continued, its successor queued)
``continue_lost_ack``     a hand-over committed, then the driver failed (SQL only)
========================  =============================================================

Actions: ``exit`` (``os._exit(137)``, like a kill -9 at that line), ``raise``
(`InjectedFault`; at the ``*_lost_ack`` points the driver's own connection error, so
the code that copes with an unacknowledged commit runs for real), ``sleep:SECONDS``
and ``stop`` (SIGSTOP this process, for zombie tests).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import dataclass

from durable.errors import ConfigurationError

POINTS = (
    "after_claim",
    "before_task",
    "after_task",
    "before_checkpoint",
    "checkpoint_lost_ack",
    "before_complete",
    "dispatch_lost_ack",
    "before_continue",
    "after_continue",
    "continue_lost_ack",
)

#: Which point a committed write's name (as given to `Connections.run`) belongs to.
_ACK_POINTS = (
    ("Recording", "checkpoint_lost_ack"),
    ("Consuming event", "checkpoint_lost_ack"),
    ("Sending event", "checkpoint_lost_ack"),
    ("Creating runs", "dispatch_lost_ack"),
    ("Continuing run", "continue_lost_ack"),
)


class InjectedFault(Exception):
    """Raised by a fault point armed with the ``raise`` action."""


@dataclass
class Fault:
    """One armed fault: fire *action* at the *nth* hit of *point* matching *match*."""

    point: str
    action: str
    match: str = ""
    nth: int = 1
    hits: int = 0
    fired: bool = False

    def __post_init__(self) -> None:
        if self.point not in POINTS:
            raise ConfigurationError(
                f"Unknown fault point {self.point!r}; the points are {', '.join(POINTS)}."
            )
        kind = self.action.split(":", 1)[0]
        if kind not in ("exit", "raise", "sleep", "stop") or (
            kind == "sleep" and not _is_number(self.action.partition(":")[2])
        ):
            raise ConfigurationError(
                f"Unknown fault action {self.action!r}; use exit, raise, sleep:SECONDS or stop."
            )


ARMED: list[Fault] = []
_lock = threading.Lock()
_local = threading.local()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse(spec: str) -> list[Fault]:
    """The faults a ``DURABLE_FAULTS`` value describes (see the module docstring)."""
    spec = spec.strip()
    if not spec:
        return []
    if spec.startswith("["):
        try:
            return [Fault(**item) for item in json.loads(spec)]
        except (TypeError, ValueError) as error:
            raise ConfigurationError(f"DURABLE_FAULTS is not a list of faults: {error}") from None
    faults = []
    for item in spec.split(","):
        point, sep, action = item.strip().partition("=")
        if not sep:
            raise ConfigurationError(f"DURABLE_FAULTS item {item!r} is not point=action.")
        faults.append(Fault(point.strip(), action.strip()))
    return faults


def arm(point: str, action: str, *, match: str = "", nth: int = 1) -> Fault:
    """Arm one fault in this process; it fires once."""
    fault = Fault(point, action, match, nth)
    with _lock:
        ARMED.append(fault)
    return fault


def disarm() -> None:
    """Forget every armed fault."""
    with _lock:
        ARMED.clear()


def hit(point: str, subject: str = "") -> None:
    """A fault point: fire the fault armed here, if any."""
    if not ARMED:
        return
    _local.subject = subject
    _fire(point, subject, None)


def committed(name: str, lost: type[BaseException]) -> None:
    """A write called *name* committed: lose its acknowledgement if a fault says so.

    *lost* is the driver's error for a dropped connection; the subject is the last one
    this thread passed to `hit` (the step being recorded).
    """
    if not ARMED:
        return
    for prefix, point in _ACK_POINTS:
        if name.startswith(prefix):
            _fire(point, getattr(_local, "subject", ""), lost)
            return


def _fire(point: str, subject: str, lost: type[BaseException] | None) -> None:
    with _lock:
        for fault in ARMED:
            if fault.fired or fault.point != point or fault.match not in subject:
                continue
            fault.hits += 1
            if fault.hits == fault.nth:
                fault.fired = True
                break
        else:
            return
    kind, _, argument = fault.action.partition(":")
    # Straight to the file descriptor: an exit next must not lose the line in a buffer.
    os.write(2, f"durable: fault injected: {point} {fault.action} ({subject})\n".encode())
    if kind == "exit":
        os._exit(137)
    elif kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "sleep":
        time.sleep(float(argument))
    elif lost is not None:
        raise lost(f"fault injected at {point} ({subject}): the commit landed, its ack was lost")
    else:
        raise InjectedFault(f"fault injected at {point} ({subject})")


ARMED.extend(parse(os.environ.get("DURABLE_FAULTS", "")))
