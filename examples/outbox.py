"""The outbox and the client: runs created in your own transaction, and started by name.

An order and the workflow that fulfils it are written in one SQLAlchemy transaction:
the committed order gets its run, the rolled-back one gets neither. Then a
`durable.Client`, which needs no workflow code, starts a run by name and reads its
result. A worker thread runs them all. Everything is in ``shop.db`` in the working
directory; run it again and the dispatches with the same ids return the stored runs.
Run it: ``python examples/outbox.py``.
"""

from __future__ import annotations

import sqlalchemy as sa

import durable

URL = "sqlite:///shop.db"


@durable.workflow(name="shop.fulfil")
def fulfil(order_id: str) -> str:
    """Fulfil an order (here: say so)."""
    return f"{order_id} shipped"


def main() -> None:
    engine = durable.configure(URL)
    app_db = sa.create_engine(URL)  # the application's own access to the same file
    orders = sa.Table("orders", sa.MetaData(), sa.Column("id", sa.Text, primary_key=True))
    orders.metadata.drop_all(app_db)  # a fresh table each time; durable's runs stay
    orders.metadata.create_all(app_db)

    with app_db.begin() as conn:  # committed: the order and its run
        conn.execute(orders.insert().values(id="o-1"))
        kept = durable.dispatch(fulfil, "o-1", connection=conn, id="fulfil-o-1")

    with app_db.connect() as conn, conn.begin() as transaction:  # rolled back: neither
        conn.execute(orders.insert().values(id="o-2"))
        durable.dispatch(fulfil, "o-2", connection=conn, id="fulfil-o-2")
        transaction.rollback()

    with app_db.connect() as conn:
        print("orders:", [row.id for row in conn.execute(sa.select(orders.c.id))])
    print("run for o-2:", engine.backend.get_run("fulfil-o-2"))

    with durable.Client(URL) as client, durable.Worker(engine, poll=0.1):
        print("o-1:", kept.result(timeout=30))
        started = client.dispatch("shop.fulfil", "o-3", id="fulfil-o-3")
        print("o-3:", client.get(started.id).result(timeout=30))
        print("runs:", sorted(run.id for run in client.list_runs(workflow="shop.fulfil")))


if __name__ == "__main__":
    main()
