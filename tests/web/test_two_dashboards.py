"""Two dashboards on one host: a browser keeps one cookie jar per host, whatever the
port, so each app needs its own cookie name, or signing into one signs out the other."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from pathlib import Path

import pytest

import durable
from durable.web import make_app, serve
from tests.web.client import Client

NAME = re.compile(r"durable_session_[0-9a-f]{12}")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[durable.Engine]:
    with durable.Engine(f"sqlite:///{tmp_path / 'd.db'}") as engine:
        yield engine


def _status(opener: urllib.request.OpenerDirector, url: str) -> int:
    try:
        with opener.open(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_signing_into_one_dashboard_keeps_the_other_signed_in(engine: durable.Engine) -> None:
    first, second = make_app(engine, token="first-token"), make_app(engine, token="second-token")
    servers = [serve(app, host="127.0.0.1", port=0) for app in (first, second)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        jar = CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        one, two = (f"http://127.0.0.1:{server.server_port}" for server in servers)
        assert _status(browser, f"{one}/?token=first-token") == 200  # after the redirect
        assert _status(browser, f"{one}/api/v1/session") == 200
        assert _status(browser, f"{two}/?token=second-token") == 200
        assert _status(browser, f"{two}/api/v1/session") == 200
        assert _status(browser, f"{one}/api/v1/session") == 200, "signed out by the other"
        names = sorted(cookie.name for cookie in jar)
        assert len(names) == 2 and all(NAME.fullmatch(name) for name in names), names
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_the_cookie_name_is_stable_for_a_token_and_secret(engine: durable.Engine) -> None:
    """Processes serving one dashboard (same token and secret) share the cookie name
    and accept each other's sessions; another token or secret is another name."""
    one = make_app(engine, token="t", secret="s")
    same = make_app(engine, token="t", secret="s")
    client = Client(one)
    client.login("t")
    cookie_name = client.cookie.partition("=")[0] if client.cookie else ""
    assert NAME.fullmatch(cookie_name)
    assert Client(same, cookie=client.cookie).get("/api/v1/session").status == 200
    for other in (make_app(engine, token="t", secret="x"), make_app(engine, token="u", secret="s")):
        other_client = Client(other)
        other_client.login(other.token)
        assert other_client.cookie and other_client.cookie.partition("=")[0] != cookie_name
        assert Client(other, cookie=client.cookie).get("/api/v1/session").status == 401
