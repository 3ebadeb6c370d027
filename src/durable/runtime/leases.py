"""The runs this process executes on one database, and their leases.

One owner string per engine (it changes in a forked child), one heartbeat thread that
renews every lease the owner holds every lease/3 seconds, and the runs to hand back
(`release_quietly`). A worker that shuts down marks its runs *draining*; runs taken
over from a dead owner stay *unproven* until they record a new step.
"""

from __future__ import annotations

import logging
import os
import threading

from durable.backends import Backend
from durable.core.records import Run

from . import owners

log = logging.getLogger("durable")


class Leases:
    """This process's runs on *backend*, leased for *lease* seconds at a time."""

    def __init__(self, backend: Backend, lease: float) -> None:
        self._backend = backend
        self._lease = lease
        self._owner = owners.new_owner()
        #: runs to hand back at their next durable call (a worker shutting down).
        self.draining: set[str] = set()
        #: runs taken over from a dead owner that have not recorded a new step since: any
        #: of them may be what killed that owner.
        self.unproven: set[str] = set()
        self._active: dict[str, int] = {}  # run id -> epoch, for runs executing here
        self._unreleased: dict[str, int] = {}  # run id -> epoch, to hand back
        self._lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def owner(self) -> str:
        """The lease-owner string (it changes in a forked child)."""
        if self._owner.split(":")[1] != str(os.getpid()):
            self._owner = owners.new_owner()
        return self._owner

    def enter(self, run_id: str, epoch: int) -> None:
        """Run *run_id* starts executing here: keep its lease alive."""
        with self._lock:
            self._active[run_id] = epoch
        self._ensure_heartbeat()

    def leave(self, run_id: str) -> None:
        """Run *run_id* stopped executing here."""
        with self._lock:
            self._active.pop(run_id, None)
        self.draining.discard(run_id)
        self.unproven.discard(run_id)

    def count(self) -> int:
        """How many runs execute in this process now (a worker's running runs)."""
        return len(self._active)

    def executing(self, run_id: str) -> bool:
        """Whether run *run_id* is executing in this process now."""
        return run_id in self._active

    def release_quietly(self, run: Run) -> None:
        """Hand a run back (QUEUED) so that another owner continues it at once.

        If the database cannot be reached, the heartbeat tries again until it can: the
        lease would not expire on its own, as the heartbeat renews every lease this
        owner holds while it executes other runs.
        """
        with self._lock:
            if self._unreleased.get(run.id) == run.epoch:
                return  # already waiting for the database to come back
        try:
            self._backend.release_run(run.id, run.epoch)
        except Exception:
            log.warning("run %s: could not release its lease; the heartbeat retries", run.id)
            with self._lock:
                self._unreleased[run.id] = run.epoch
            self._ensure_heartbeat()

    def stop(self) -> None:
        """Stop the heartbeat (leases then expire unless released)."""
        self._stopping.set()
        thread = self._heartbeat
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _release_unreleased(self) -> None:
        """Hand back the runs `release_quietly` could not (fenced by their epoch, so a
        run that has moved on since is left alone)."""
        with self._lock:
            pending = dict(self._unreleased)
        for run_id, epoch in pending.items():
            try:
                self._backend.release_run(run_id, epoch)
            except Exception:
                return  # still unreachable: the next beat tries again
            with self._lock:
                if self._unreleased.get(run_id) == epoch:
                    del self._unreleased[run_id]

    def _ensure_heartbeat(self) -> None:
        thread = self._heartbeat
        if thread is not None and thread.is_alive():
            return
        with self._lock:
            if self._heartbeat is not None and self._heartbeat.is_alive():
                return
            self._heartbeat = threading.Thread(
                target=self._beat, name="durable-heartbeat", daemon=True
            )
            self._heartbeat.start()

    def _beat(self) -> None:
        while not self._stopping.wait(self._lease / 3):
            if self._unreleased:
                self._release_unreleased()
            if not self._active:
                continue
            try:
                self._backend.renew_leases(self.owner, self._lease)
            except Exception as error:
                log.warning("could not renew leases: %s", error)
