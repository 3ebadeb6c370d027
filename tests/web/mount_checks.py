"""What every mount of the dashboard must keep, whatever the host framework: the
prefix in every link, asset, redirect, Location and cookie path, and every rule of the
security gate (token login, cookie, CSRF, Origin, Host). The FastAPI, Flask and Django
tests each drive their framework's test client through `check_mount`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from http.cookies import SimpleCookie
from urllib.parse import urljoin

from durable import workflow
from tests.web.client import ORIGIN, Reply

#: the prefix the tests mount at: two segments, so a prefix is never just one name.
PREFIX = "/tools/durable"
TOKEN = "mount-token"
#: what a test's framework answers a request with: (method, absolute path and query,
#: headers, body); its own cookie jar and redirects stay out of it.
Send = Callable[[str, str, dict[str, str], bytes], Reply]

_ASSET = re.compile(r'(?:href|src)="([^"#][^"]*)"')
_IMPORT = re.compile(r'from "(\./[^"]+)"')
_HOST = {"Host": "127.0.0.1:8765"}


@workflow(name="tests.web.mount.greet")
def greet(name: str) -> str:
    return f"hello {name}"


def check_mount(send: Send) -> str:
    """Walk the mounted dashboard as a browser and as a script would; return the id of
    the run it started."""

    def get(path: str, headers: dict[str, str] | None = None) -> Reply:
        return send("GET", PREFIX + path, {**_HOST, **(headers or {})}, b"")

    def post(path: str, headers: dict[str, str], data: object) -> Reply:
        every = {**_HOST, "Content-Type": "application/json", **headers}
        return send("POST", PREFIX + path, every, json.dumps(data).encode())

    bare = send("GET", PREFIX, dict(_HOST), b"")
    # The framework may add the slash before the dashboard does (Starlette 307,
    # Django's APPEND_SLASH 301, the dashboard itself 308): any of them will do.
    assert bare.status in (301, 307, 308) and bare.header("Location") in (
        PREFIX + "/",
        "http://127.0.0.1:8765" + PREFIX + "/",
    ), (bare.status, bare.headers)
    assert get("/").status == 401
    refused = get("/api/v1/runs")
    assert refused.status == 401 and refused.header("WWW-Authenticate") == 'Bearer realm="durable"'
    assert get("/?token=wrong").status == 401

    login = get(f"/?token={TOKEN}&view=runs")
    assert login.status == 303, login.body
    assert login.header("Location") == f"{PREFIX}/?view=runs"
    [(name, morsel)] = SimpleCookie(login.header("Set-Cookie")).items()
    assert morsel["path"] == PREFIX and morsel["httponly"] and morsel["samesite"] == "Strict"
    browser = {"Cookie": f"{name}={morsel.value}"}

    _check_assets(get, browser)
    csrf = get("/api/v1/session", browser).json()["csrf"]
    spec = get("/api/v1/openapi.json", browser).json()
    base = urljoin(PREFIX + "/api/v1/openapi.json", spec["servers"][0]["url"])
    assert base == PREFIX + "/api/v1/"

    start = {"workflow": greet.name, "args": ["mount"]}
    same_origin = {**browser, "Origin": ORIGIN}
    assert post("/api/v1/runs", same_origin, start).status == 403  # no X-CSRF-Token
    foreign = {**browser, "X-CSRF-Token": csrf, "Origin": "http://evil.example"}
    assert post("/api/v1/runs", foreign, start).status == 403
    started = post("/api/v1/runs", {**same_origin, "X-CSRF-Token": csrf}, start)
    assert started.status == 201, started.body
    run_id = started.json()["id"]
    assert started.header("Location") == f"{PREFIX}/api/v1/runs/{run_id}"

    script = {"Authorization": f"Bearer {TOKEN}"}
    assert post("/api/v1/runs", script, {**start, "id": "by-script"}).status == 201
    listed = get("/api/v1/runs", script).json()
    assert {run["id"] for run in listed["items"]} >= {run_id, "by-script"}
    wrong = get("/api/v1/runs", {"Authorization": "Bearer nope", **browser})
    assert wrong.status == 401  # a wrong token is not rescued by the cookie
    rebound = send("GET", PREFIX + "/api/v1/runs", {**script, "Host": "evil.example"}, b"")
    assert rebound.status == 400, rebound.body  # DNS rebinding: the Host is checked
    return run_id


def _check_assets(get: Callable[..., Reply], browser: dict[str, str]) -> None:
    """The page, every file it links and every module those import, served under the
    prefix with their own content types."""
    page = get("/", browser)
    assert page.status == 200 and page.content_type == "text/html", page.body[:200]
    queue = [urljoin(PREFIX + "/", link) for link in _ASSET.findall(page.body.decode())]
    queue = [url for url in queue if url.startswith(PREFIX + "/")]
    assert PREFIX + "/static/app.js" in queue and PREFIX + "/static/app.css" in queue
    seen: set[str] = set()
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        asset = get(url.removeprefix(PREFIX), browser)
        assert asset.status == 200, url
        kind = "text/css" if url.endswith(".css") else "text/javascript"
        assert asset.content_type == kind, (url, asset.content_type)
        if url.endswith(".js"):
            queue += [urljoin(url, name) for name in _IMPORT.findall(asset.body.decode())]
    assert len(seen) > 5, seen  # app.css, app.js and the modules it imports
