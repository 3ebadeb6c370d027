"""The dashboard mounted in Flask under a prefix with werkzeug's DispatcherMiddleware,
driven by Flask's test client."""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable.web import make_app
from tests.conftest import BACKENDS
from tests.web.client import Reply
from tests.web.mount_checks import PREFIX, TOKEN, check_mount, greet

flask = pytest.importorskip("flask")  # in the test extra; CI always has it
from werkzeug.middleware.dispatcher import DispatcherMiddleware  # noqa: E402


def host_app(engine: durable.Engine) -> Any:
    """A Flask app with a route of its own that dispatches, and the dashboard."""
    app = flask.Flask(__name__)

    @app.post("/greetings/<name>")
    def start_greeting(name: str) -> dict[str, str]:
        return {"run": durable.dispatch(greet, name).id}

    dashboard = make_app(engine, token=TOKEN)
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {PREFIX: dashboard})  # type: ignore[method-assign]
    return app


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_dashboard_mounted_in_flask_keeps_prefix_and_security(engine: durable.Engine) -> None:
    """Under DispatcherMiddleware, every link, asset, redirect and cookie stays under
    the prefix, and the token, CSRF, Origin and Host rules hold; Flask's own routes
    still answer and dispatch."""
    client = host_app(engine).test_client(use_cookies=False)

    def send(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        reply = client.open(path, method=method, headers=headers, data=body)
        return Reply(reply.status_code, list(reply.headers.items()), reply.data)

    run_id = check_mount(send)
    assert engine.reread(run_id).status == "queued"
    dispatched = client.post("/greetings/ada").get_json()["run"]
    assert engine.reread(dispatched).workflow == greet.name
