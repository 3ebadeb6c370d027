"""The SQL of tallies (`TallyStore`): sums over ``durable_tallies``, whose rows the
triggers of `durable.backends._tallies_schema` keep, and the runs per status now.

Reads are ranges of the primary key (grain, bucket, ...): a week of hourly tallies is
a few thousand rows whatever the number of runs.
"""

from __future__ import annotations

import sqlalchemy as sa

from durable.backends._schema import runs
from durable.backends._tally_sql import tallies

from .base import Compiler, bind


class TallyStatements(Compiler):
    """The statements of `TallyStore`, compiled for one dialect."""

    def _define_tallies(self) -> None:
        t, r = tallies.c, runs.c
        grain = bind("grain", t.grain)
        since = bind("since", t.bucket)
        filters = (
            t.grain == grain,
            t.bucket >= since,
            sa.or_(bind("kind", t.kind).is_(None), t.kind == bind("kind", t.kind)),
            sa.or_(bind("name", t.name).is_(None), t.name == bind("name", t.name)),
            sa.or_(
                bind("workflow", t.workflow).is_(None),
                t.workflow == bind("workflow", t.workflow),
            ),
        )
        sums = (sa.func.sum(t.n), sa.func.sum(t.seconds), sa.func.max(t.last_at))
        no_bin = sa.literal_column("-1", sa.Integer)
        #: by (by bucket?, by bin?): (kind, name, workflow, bucket, status, bin, n,
        #: seconds, last_at) per key; over buckets the bucket is ``:since``, over bins
        #: the bin is -1.
        self.tallies = {}
        for by_bucket in (True, False):
            for by_bin in (True, False):
                at = t.bucket if by_bucket else since
                binned = t.bin if by_bin else no_bin
                keys = [t.kind, t.name, t.workflow, t.status]
                keys += [t.bucket] if by_bucket else []
                keys += [t.bin] if by_bin else []
                self.tallies[by_bucket, by_bin] = self.compile(
                    sa.select(t.kind, t.name, t.workflow, at, t.status, binned, *sums)
                    .where(*filters)
                    .group_by(*keys)
                    .having(sa.func.sum(t.n) != 0)
                )
        #: (status, count) of the runs in ``:statuses`` (through the status index).
        self.status_counts = self.compile(
            sa.select(r.status, sa.func.count())
            .where(self._in_names(r.status, "statuses"))
            .group_by(r.status)
        )
