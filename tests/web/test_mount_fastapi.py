"""The dashboard mounted in FastAPI under a prefix through `durable.web.asgi_app`,
driven by FastAPI's test client (the ASGI app in-process)."""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.web import AsgiApp, asgi_app, make_app
from tests.conftest import BACKENDS
from tests.web.client import Reply
from tests.web.mount_checks import PREFIX, TOKEN, check_mount, greet

fastapi = pytest.importorskip("fastapi")  # in the test extra; CI always has it
from fastapi.testclient import TestClient  # noqa: E402


def host_app(engine: durable.Engine) -> Any:
    """A FastAPI app with a route of its own that dispatches, and the dashboard."""
    app = fastapi.FastAPI()

    @app.post("/greetings/{name}")
    def start_greeting(name: str) -> dict[str, str]:
        handle = durable.dispatch(greet, name)
        return {"run": handle.id}

    app.mount(PREFIX, asgi_app(make_app(engine, token=TOKEN)))
    return app


def sender(client: TestClient) -> Any:
    def send(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        client.cookies.clear()  # the checks send their own Cookie header
        reply = client.request(method, path, headers=headers, content=body, follow_redirects=False)
        return Reply(reply.status_code, list(reply.headers.items()), reply.content)

    return send


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_dashboard_mounted_in_fastapi_keeps_prefix_and_security(engine: durable.Engine) -> None:
    """Under FastAPI's mount, every link, asset, redirect and cookie stays under the
    prefix, and the token, CSRF, Origin and Host rules hold."""
    with TestClient(host_app(engine), base_url="http://127.0.0.1:8765") as client:
        run_id = check_mount(sender(client))
        assert engine.reread(run_id).status == "queued"


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_a_fastapi_route_dispatches_a_run_the_dashboard_lists(engine: durable.Engine) -> None:
    """A request handler's `durable.dispatch` queues a run the mounted API then shows."""
    with TestClient(host_app(engine), base_url="http://127.0.0.1:8765") as client:
        run_id = client.post("/greetings/ada").json()["run"]
        reply = client.get(
            f"{PREFIX}/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert reply.status_code == 200 and reply.json()["workflow"] == greet.name


def test_asgi_app_takes_only_a_web_app(memory_engine: durable.Engine) -> None:
    """asgi_app() of an engine is a TypeError that says to call make_app first."""
    with pytest.raises(TypeError, match=r"asgi_app\(make_app\(engine"):
        asgi_app(memory_engine)  # type: ignore[arg-type]
    wrapped = asgi_app(make_app(memory_engine, token="t"))
    assert isinstance(wrapped, AsgiApp) and wrapped.token == "t"
