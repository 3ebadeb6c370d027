"""The state machine's rules that create runs and claim them, and their leases: the
first runs (`family`), create, claim_next, claim_run, mark_progress, heartbeat, expire,
release."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import MultipleResults, initialize, multiple, rule

from durable.core.records import RunStatus
from tests.backends._machine_base import MachineBase, runs
from tests.backends._machine_strategies import (
    KEYS,
    OWNER,
    PRIORITY,
    QUEUES,
    SHIFT,
    STRANGER,
    TAKEN,
    VERSION,
    WORKFLOWS,
)
from tests.backends._model_records import EXPIRED, LEASE, RUN_IDS
from tests.backends._model_views import view_run


class RunRules(MachineBase):
    """Creating, claiming and leasing runs."""

    @initialize(
        target=runs,
        owners=st.tuples(st.none() | OWNER, st.none() | OWNER, st.none() | OWNER),
        parent_of_r2=st.sampled_from(("r0", "r1", None)),
        queue=st.sampled_from(QUEUES),
        priority=PRIORITY,
        keys=st.tuples(*[st.sampled_from((None, None, *KEYS))] * 3),
    )
    def family(
        self,
        owners: tuple[str | None, str | None, str | None],
        parent_of_r2: str | None,
        queue: str,
        priority: int,
        keys: tuple[str | None, ...] = (None, None, None),
    ) -> MultipleResults[str]:
        """Three runs to begin with: r0, its child r1, and r2 below one of them or alone;
        each maybe with a concurrency key."""
        self._create(
            "r0", owners[0], "default", 1, "wf.a", same_call=True, parent=None, key=keys[0]
        )
        self._create(
            "r1", owners[1], queue, priority, "wf.b", same_call=True, parent="r0", key=keys[1]
        )
        self._create(
            "r2", owners[2], "default", 0, "wf.a", same_call=True, parent=parent_of_r2, key=keys[2]
        )
        return multiple("r0", "r1", "r2")

    @rule(
        target=runs,
        run_id=st.sampled_from((*RUN_IDS, TAKEN)),
        owner=st.none() | OWNER,
        queue=st.sampled_from(QUEUES),
        priority=PRIORITY,
        workflow=st.sampled_from(WORKFLOWS),
        same_call=st.booleans(),
        parent=st.none() | runs,
        timeout=st.none() | st.sampled_from((0.5, 3600.0)),
        key=st.sampled_from((None, None, *KEYS)),
        key_limit=st.sampled_from((None, None, 1, 2)),
        version=VERSION,
    )
    def create(
        self,
        *,
        run_id: str,
        owner: str | None,
        queue: str,
        priority: int,
        workflow: str,
        same_call: bool,
        parent: str | None,
        timeout: float | None = None,
        key: str | None = None,
        key_limit: int | None = None,
        version: str | None = None,
    ) -> MultipleResults[str]:
        """create_run: a new id is created (queued or owned, of *version*), a known id is
        returned as is, with the parent it was stored with whatever parent the call names
        (the engine tells a parent's own child from a foreign run at the child's id by
        it). With a *key*, maybe a limit of its own (its queue gets a row)."""
        if key is None:
            key_limit = None
        created = self._create(
            run_id,
            owner,
            queue,
            priority,
            workflow,
            same_call=same_call,
            parent=parent,
            timeout=timeout,
            key=key,
            key_limit=key_limit,
            version=version,
        )
        return multiple(run_id) if created else multiple()

    @rule(
        owner=OWNER,
        queue=st.sampled_from((*QUEUES, "default")),
        workflows=st.sampled_from((WORKFLOWS, WORKFLOWS, WORKFLOWS[:1], WORKFLOWS[1:])),
        limit=st.integers(1, 3),
        steer=st.booleans(),
        version=VERSION,
        only=st.booleans(),
    )
    def claim_next(
        self,
        owner: str,
        queue: str,
        workflows: tuple[str, ...],
        limit: int,
        *,
        steer: bool = False,
        version: str | None = None,
        only: bool = False,
    ) -> None:
        """claim_next: the highest priority, then the oldest, queued runs become RUNNING,
        as far as the queue's limits let them (see `Model._choose`); by a claimer of
        *version* (stamped on the runs it starts), maybe claiming *only* runs of it or of
        none. Steered to the declared queue with the most queued runs."""
        if steer and self.model.queues:
            queued = [r.queue for r in self.model.runs.values() if r.status is RunStatus.QUEUED]
            queue = max(sorted(self.model.queues), key=queued.count)
            workflows = WORKFLOWS
        only = only and version is not None
        expected = self.model.claim_next(
            owner, queue, workflows, limit, version=version, only=version if only else None
        )
        self._on_all(
            f"claim_next(owner={owner!r}, queue={queue!r}, workflows={workflows}, limit={limit}, "
            f"version={version!r}, only_version={only})",
            expected,
            lambda b: [
                (run.id, view_run(b, run))
                for run in b.claim_next(
                    owner=owner,
                    queue=queue,
                    workflows=workflows,
                    limit=limit,
                    lease=LEASE,
                    version=version,
                    only_version=only,
                )
            ],
        )

    @rule(
        run_id=runs,
        owner=OWNER,
        shift=SHIFT,
        dead=st.sampled_from(("nobody", "nobody", "the holder", "a stranger")),
        version=VERSION,
        only=st.booleans(),
    )
    def claim_run(
        self,
        run_id: str,
        owner: str,
        shift: int,
        dead: str,
        *,
        version: str | None = None,
        only: bool = False,
    ) -> None:
        """claim_run: a queued, blocked, due, expired or dead-owned run is taken over, if
        its queue's limits admit it (see `Model._admitted`); *version* and *only* as for
        claim_next."""
        epoch = self._epoch(run_id, shift)
        only = only and version is not None
        run = self.model.runs.get(run_id)
        dead_owner = {
            "nobody": None,
            "the holder": run.owner if run is not None else None,
            "a stranger": STRANGER,
        }[dead]
        expected = self.model.claim_run(
            run_id, owner, epoch, dead_owner, version=version, only=version if only else None
        )
        self._on_all(
            f"claim_run({run_id!r}, owner={owner!r}, epoch={epoch}, dead_owner={dead_owner!r}, "
            f"version={version!r}, only_version={only})",
            expected,
            lambda b: view_run(
                b,
                b.claim_run(
                    run_id,
                    owner=owner,
                    lease=LEASE,
                    epoch=epoch,
                    dead_owner=dead_owner,
                    version=version,
                    only_version=only,
                ),
            ),
        )

    @rule(run_id=runs, shift=SHIFT)
    def mark_progress(self, run_id: str, shift: int) -> None:
        """mark_progress: the run's recovery count returns to 0, fenced by epoch."""
        epoch = self._epoch(run_id, shift)
        self.model.mark_progress(run_id, epoch)
        self._on_all(
            f"mark_progress({run_id!r}, {epoch})", None, lambda b: b.mark_progress(run_id, epoch)
        )

    @rule(owner=OWNER)
    def heartbeat(self, owner: str) -> None:
        """renew_leases: every RUNNING run of the owner has a live lease again."""
        expected = self.model.renew_leases(owner, live=True)
        self._on_all(
            f"renew_leases({owner!r}, {LEASE})", expected, lambda b: b.renew_leases(owner, LEASE)
        )

    @rule(owner=OWNER)
    def expire(self, owner: str) -> None:
        """The owner stops heart-beating: its leases run out (recoverable lists them)."""
        expected = self.model.renew_leases(owner, live=False)
        self._on_all(
            f"renew_leases({owner!r}, {EXPIRED}) (expiry)",
            expected,
            lambda b: b.renew_leases(owner, EXPIRED),
        )

    @rule(run_id=runs, shift=SHIFT)
    def release(self, run_id: str, shift: int) -> None:
        """release_run: a RUNNING run is QUEUED again, fenced by epoch."""
        epoch = self._epoch(run_id, shift)
        expected = self.model.release_run(run_id, epoch)
        self._on_all(
            f"release_run({run_id!r}, {epoch})", expected, lambda b: b.release_run(run_id, epoch)
        )
