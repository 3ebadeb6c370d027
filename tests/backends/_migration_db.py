"""What the migration tests share: raw access to a test database, to build an old
version's shape and read a schema's, and taking a new database back to the shape of a
version before today's tallies."""

from __future__ import annotations

import sqlite3
from typing import Any


class Database:
    """Raw access to one test database, for building old shapes and reading schemas."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind, self.url = kind, url

    def execute(self, statement: str) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
                return conn.execute(statement).fetchall()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def shape(self) -> dict[str, Any]:
        """Columns (name, type, nullability, default) and index definitions, per table,
        and the triggers' code (SQLite's triggers, PostgreSQL's trigger functions)."""
        if self.kind == "sqlite":
            tables = [
                t for (t,) in self.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            return {
                "columns": {
                    t: sorted(
                        (name, kind, notnull, default)
                        for _, name, kind, notnull, default, _ in self.execute(
                            f"PRAGMA table_info({t})"
                        )
                    )
                    for t in tables
                },
                "indexes": sorted(
                    " ".join(sql.replace("IF NOT EXISTS ", "").split())
                    for (sql,) in self.execute(
                        "SELECT sql FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
                    )
                ),
                "triggers": sorted(
                    sql
                    for (sql,) in self.execute("SELECT sql FROM sqlite_master WHERE type='trigger'")
                ),
            }
        columns = self.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = current_schema()"
        )
        indexes = self.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        )
        per_table: dict[str, list[Any]] = {}
        for table, *rest in columns:
            per_table.setdefault(table, []).append(tuple(rest))
        schema = self.execute("SELECT current_schema()")[0][0]
        functions = self.execute(
            "SELECT p.proname, p.prosrc FROM pg_proc AS p JOIN pg_namespace AS n "
            "ON n.oid = p.pronamespace WHERE n.nspname = current_schema()"
        )
        return {
            "columns": {t: sorted(c) for t, c in per_table.items()},
            "indexes": sorted(d.replace(f"{schema}.", "") for (d,) in indexes),
            "triggers": sorted(tuple(f) for f in functions),
        }


def tally_triggers(db: Database) -> list[str]:
    """The names of the tally triggers (SQLite) or trigger functions (PostgreSQL) in
    *db*."""
    if db.kind == "sqlite":
        found = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
    else:
        found = (
            "SELECT p.proname FROM pg_proc AS p JOIN pg_namespace AS n "
            "ON n.oid = p.pronamespace WHERE n.nspname = current_schema()"
        )
    return [name for (name,) in db.execute(found) if name.startswith("durable_tally_")]


def drop_tallies(db: Database, version: int = 16) -> None:
    """Take a new database back to version 16's shape (no tallies, no triggers), or
    with *version* 17 or 18, to the tallies without today's triggers and column."""
    for name in tally_triggers(db):
        if db.kind == "sqlite":
            db.execute(f"DROP TRIGGER {name}")
        else:
            db.execute(f"DROP FUNCTION {name}() CASCADE")
    db.execute("ALTER TABLE durable_history DROP COLUMN tallied")
    if version == 16:
        db.execute("DROP TABLE durable_tallies")
    if db.kind == "sqlite" and version < 18:
        db.execute("DROP TABLE durable_tally_bins")
    db.execute(f"UPDATE durable_meta SET value = '{version}' WHERE key = 'schema_version'")
