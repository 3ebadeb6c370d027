"""A service that starts and watches runs by name, without the workflow code.

``python -m tests.e2e.client_caller MODE URL``, MODE one of:

- ``client``: dispatch ``tests.e2e.client_app.order`` by name (twice: plainly, and in a
  committed SQLAlchemy transaction), confirm both, print their results and what this
  process imported as one JSON line.
- ``crash``: dispatch in an open transaction, print ``ready``, then wait to be killed
  before committing.
"""

from __future__ import annotations

import json
import sys
import time

import sqlalchemy as sa

import durable
from durable.runtime import defaults

NAME = "tests.e2e.client_app.order"


def app_url(url: str) -> str:
    """The application's SQLAlchemy URL for durable's database (PostgreSQL: psycopg,
    the server's default schema)."""
    if url.startswith("sqlite"):
        return url
    return url.split("?", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)


def main(mode: str, url: str) -> None:
    client = durable.Client(url)
    app = sa.create_engine(app_url(url))
    if mode == "crash":
        with app.connect() as conn, conn.begin():
            client.dispatch(NAME, "doomed", connection=conn, id="crash-1")
            print("ready", flush=True)
            time.sleep(600)  # killed here, before the commit
        return
    plain = client.dispatch(NAME, "widget", 3, rush=True, id="client-1")
    with app.begin() as conn:
        outboxed = client.dispatch(NAME, "bolt", id="client-2", connection=conn)
    for handle in (plain, outboxed):
        client.send(handle.id, "confirm", {"by": "client"})
    results = [client.get(h.id).result(timeout=60) for h in (plain, outboxed)]
    listed = [run.id for run in client.list_runs(workflow=NAME, status=["completed"])]
    print(
        json.dumps(
            {
                "results": results,
                "listed": sorted(listed),
                "imported": "tests.e2e.client_app" in sys.modules,
                "default_engine": defaults._default is not None,
            }
        )
    )
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
