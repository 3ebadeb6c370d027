"""A throw-away PostgreSQL schema for a benchmark: `fresh_schema` makes one and returns
a URL whose tables live in it; `drop_schema` drops the schema such a URL names."""

from __future__ import annotations

import uuid


def fresh_schema(base: str) -> str:
    """A new schema on the server of *base*, and *base* selecting it."""
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}options=-csearch_path%3D{schema}"


def drop_schema(base: str, url: str) -> None:
    """Drop the schema *url* (from `fresh_schema`) selects, with its tables."""
    import psycopg

    schema = url.rsplit("%3D", 1)[1]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
