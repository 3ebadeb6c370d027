"""A FastAPI service that starts a durable workflow from a request handler and serves
durable's dashboard at /durable (docs/howto/web-apps.md).

Serve it with ``uvicorn web_app:app`` and run its workflows with
``durable worker web_app``. Run as a script, it drives itself instead: an in-process
worker, FastAPI's test client placing an order twice (one run: the id is the order's),
reading its status, and logging in to the dashboard under the prefix.
Needs ``pip install fastapi uvicorn``.
"""

from __future__ import annotations

import os

from fastapi import FastAPI

import durable
from durable.web import asgi_app, make_app

TOKEN = os.environ.get("DURABLE_UI_TOKEN", "change-me")


@durable.task
def charge(order_id: str, cents: int) -> str:
    return f"receipt-{order_id}-{cents}"


@durable.workflow
def checkout(order_id: str, cents: int) -> str:
    return charge(order_id, cents)


durable.configure(os.environ.get("DURABLE_DATABASE_URL", "sqlite:///shop.db"))
app = FastAPI()


# `def`, not `async def`: dispatch commits to the database, so FastAPI runs the handler
# in its thread pool instead of blocking the event loop.
@app.post("/orders/{order_id}")
def place_order(order_id: str, cents: int) -> dict[str, str]:
    handle = durable.dispatch(checkout, order_id, cents, id=f"checkout-{order_id}")
    return {"run": handle.id}


@app.get("/orders/{order_id}")
def order_status(order_id: str) -> dict[str, str]:
    return {"status": str(durable.get(f"checkout-{order_id}").status())}


dashboard = make_app(durable.get_engine(), token=TOKEN, allowed_hosts=["shop.example.com"])
app.mount("/durable", asgi_app(dashboard))


if __name__ == "__main__":
    from fastapi.testclient import TestClient

    worker = durable.Worker(poll=0.1).start()
    try:
        with TestClient(app, base_url="http://shop.example.com") as client:
            first = client.post("/orders/o-7", params={"cents": 1250}).json()["run"]
            again = client.post("/orders/o-7", params={"cents": 1250}).json()["run"]
            print(f"placed order o-7 as run {first}; placed again: run {again}")
            print(f"result: {durable.get(first).result(timeout=30)}")
            print(f"status: {client.get('/orders/o-7').json()['status']}")
            login = client.get(f"/durable/?token={TOKEN}", follow_redirects=False)
            print(f"dashboard login: {login.status_code} to {login.headers['location']}")
            runs = client.get("/durable/api/v1/runs", headers={"Authorization": f"Bearer {TOKEN}"})
            print(f"the dashboard's API lists: {[run['id'] for run in runs.json()['items']]}")
    finally:
        worker.stop(grace=5)
