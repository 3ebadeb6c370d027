"""The soak's reads of its PostgreSQL schema (benchmarks/soak.py): sizes, row counts and
dead tuples of its three tables, and the VACUUM it runs when autovacuum is off."""

from __future__ import annotations

import time
from typing import Any

TABLES = ("durable_runs", "durable_history", "durable_events")
FINISHED = "('completed', 'failed', 'cancelled', 'dead')"


class Database:
    """Reads (and VACUUMs) of the soak's schema, on one autocommit connection."""

    def __init__(self, url: str, schema: str) -> None:
        import psycopg

        self.schema = schema
        self.conn = psycopg.connect(url, autocommit=True)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params or None).fetchall()

    def tables(self) -> dict[str, dict[str, int]]:
        sizes = {}
        for table in TABLES:
            size, count = self.rows(
                f"SELECT pg_total_relation_size('{table}'), count(*) FROM {table}"
            )[0]
            dead = self.rows(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
                self.schema,
                table,
            )
            sizes[table] = {
                "bytes": int(size),
                "rows": int(count),
                "dead": int(dead[0][0]) if dead else 0,
            }
        return sizes

    def autovacuum(self) -> bool:
        return bool(self.rows("SHOW autovacuum")[0][0] == "on")

    def vacuum(self) -> float:
        """VACUUM the three tables; return the seconds it took."""
        started = time.perf_counter()
        self.conn.execute(f"VACUUM {', '.join(TABLES)}")
        return time.perf_counter() - started

    def close(self) -> None:
        self.conn.close()
