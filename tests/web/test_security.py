"""The web app's gate: token login, session cookie, CSRF, Origin, Host, read-only,
content types and response headers, checked in-process against a stand-in ops object."""

from __future__ import annotations

import re
from http.cookies import SimpleCookie
from typing import Any

import pytest

from durable.errors import StorageError
from durable.web import WebApp
from tests.web.client import ORIGIN, Client, FakeOps, Reply, fake_app, location_path

TOKEN = "t0ken-for-tests"

GET_PATHS = ["/api/v1/runs", "/api/v1/session", "/api/v1/health", "/api/v1/stats"]
POSTS = [
    ("/api/v1/runs", {"workflow": "app.flow"}),
    ("/api/v1/runs/r1/cancel", {}),
    ("/api/v1/runs/r1/pause", {}),
    ("/api/v1/runs/r1/resume", {}),
    ("/api/v1/runs/r1/retry", {}),
    ("/api/v1/runs/r1/events", {"name": "go"}),
]


@pytest.fixture
def ops() -> FakeOps:
    return FakeOps()


@pytest.fixture
def app(ops: FakeOps) -> WebApp:
    return fake_app(ops, token=TOKEN)


@pytest.fixture
def browser(app: WebApp) -> Client:
    """A browser logged in with the token: it holds the session cookie and CSRF token."""
    client = Client(app)
    client.login(TOKEN)
    return client


@pytest.mark.parametrize("path", [*GET_PATHS, "/api/v1/runs/r1", "/api/v1/nothing"])
def test_the_api_without_credentials_is_401_problem_json(app: WebApp, path: str) -> None:
    """No token and no cookie: 401 problem+json with a Bearer challenge, nothing else."""
    reply = Client(app).get(path)
    assert reply.status == 401
    assert reply.content_type == "application/problem+json"
    assert reply.json()["status"] == 401 and "Bearer" in reply.json()["detail"]
    assert reply.header("WWW-Authenticate") == 'Bearer realm="durable"'


@pytest.mark.parametrize("path", ["/", "/static/app.js"])
def test_pages_without_credentials_explain_how_to_log_in(app: WebApp, path: str) -> None:
    """The page itself answers 401 with HTML pointing at the URL durable ui printed."""
    reply = Client(app).get(path)
    assert reply.status == 401 and reply.content_type == "text/html"
    assert b"durable ui" in reply.body


def test_the_token_in_the_url_becomes_a_strict_httponly_cookie(app: WebApp) -> None:
    """/?token=T sets durable_session_<hex> (HttpOnly, SameSite=Strict, Path=/) and redirects
    with 303 to the same URL without the token; the cookie then authenticates."""
    client = Client(app)
    reply = client.get("/", query=f"token={TOKEN}&view=runs")
    assert reply.status == 303
    assert location_path(reply) == "/?view=runs"
    raw = reply.header("Set-Cookie") or ""
    assert re.search(r"(?i)\bHttpOnly\b", raw) and re.search(r"(?i)SameSite=Strict", raw)
    morsel = SimpleCookie(raw)[app.guard.cookie]
    assert morsel["path"] == "/" and not morsel["secure"]
    assert TOKEN not in morsel.value
    client.cookie = f"{app.guard.cookie}={morsel.value}"
    assert client.get("/api/v1/runs").status == 200
    page = client.get("/")
    assert page.status == 200 and page.content_type == "text/html"


def test_a_wrong_token_in_the_url_sets_no_cookie(app: WebApp) -> None:
    """A wrong token gets the 401 page and no cookie."""
    reply = Client(app).get("/", query="token=guess")
    assert reply.status == 401 and reply.header("Set-Cookie") is None


def test_https_cookies_are_secure(app: WebApp) -> None:
    """Behind HTTPS the cookie carries Secure."""

    def over_https(environ: dict[str, Any], start_response: Any) -> Any:
        environ["wsgi.url_scheme"] = "https"
        return app(environ, start_response)

    reply = Client(over_https).get("/", query=f"token={TOKEN}")
    assert SimpleCookie(reply.header("Set-Cookie"))[app.guard.cookie]["secure"]


def test_bearer_tokens_authenticate_and_wrong_ones_do_not(app: WebApp, browser: Client) -> None:
    """The right bearer token works; a wrong one is 401 even alongside a valid cookie."""
    assert Client(app, token=TOKEN).get("/api/v1/runs").status == 200
    assert Client(app, token="nope").get("/api/v1/runs").status == 401
    wrong = browser.get("/api/v1/runs", headers={"Authorization": "Bearer nope"})
    assert wrong.status == 401


def test_other_authorization_schemes_leave_the_cookie_in_charge(
    app: WebApp, browser: Client
) -> None:
    """Basic auth added by a proxy in front neither logs in nor hides the cookie."""
    basic = {"Authorization": "Basic dXNlcjpwdw=="}
    assert browser.get("/api/v1/runs", headers=basic).status == 200
    assert Client(app).get("/api/v1/runs", headers=basic).status == 401


def test_the_session_is_found_among_other_apps_cookies(app: WebApp, browser: Client) -> None:
    """Other cookies on the host, even ones Python's cookie parser rejects, and another
    app's durable_session cookie (even one of our name: an app at another path), do not
    hide ours."""
    assert browser.cookie is not None
    ours = app.guard.cookie
    others = f'theme="a,b"; bad[1]=x; durable_session=x.0; {ours}=other.0000; _xsrf=2|ab|cd'
    browser.cookie = f"{others}; {browser.cookie}; after=1"
    assert browser.get("/api/v1/runs").status == 200


def test_a_forged_or_foreign_cookie_is_refused(app: WebApp, browser: Client) -> None:
    """A cookie whose signature does not verify, or that another app (another token)
    issued, authenticates nothing."""
    assert browser.cookie is not None
    session, _, signature = browser.cookie.partition("=")[2].partition(".")
    name = app.guard.cookie
    forged = Client(app, cookie=f"{name}={session}.{'0' * len(signature)}")
    assert forged.get("/api/v1/runs").status == 401
    other = fake_app(None, token="another")
    value = browser.cookie.partition("=")[2]
    assert Client(other, cookie=f"{other.guard.cookie}={value}").get("/api/v1/runs").status == 401
    assert Client(app, cookie=f"{name}=garbage").get("/api/v1/runs").status == 401


def test_a_shared_secret_and_token_share_sessions() -> None:
    """Two processes with the same secret and token accept each other's cookies."""
    first = fake_app(None, token=TOKEN, secret="s")
    second = fake_app(None, token=TOKEN, secret="s")
    browser = Client(first)
    browser.login(TOKEN)
    other = Client(second, cookie=browser.cookie, csrf=browser.csrf)
    assert other.post("/api/v1/runs/r1/cancel").status == 200


def test_each_session_gets_its_own_csrf_token(app: WebApp, browser: Client) -> None:
    """The CSRF token is an HMAC of a random session id: hex, per session, and none for
    bearer clients."""
    another = Client(app)
    another.login(TOKEN)
    assert browser.csrf and re.fullmatch(r"[0-9a-f]{64}", browser.csrf)
    assert another.csrf != browser.csrf
    assert Client(app, token=TOKEN).get("/api/v1/session").json() == {
        "csrf": "",
        "read_only": False,
    }


def test_cookie_posts_with_csrf_and_origin_act_as_the_dashboard(
    browser: Client, ops: FakeOps
) -> None:
    """A same-origin POST with the CSRF header goes through, recorded as "dashboard"."""
    assert browser.post("/api/v1/runs/r1/cancel").status == 200
    assert ops.last("cancel") == (("r1",), {"actor": "dashboard"})


@pytest.mark.parametrize(("path", "body"), POSTS)
def test_cookie_posts_without_the_csrf_token_are_403(
    browser: Client, ops: FakeOps, path: str, body: object
) -> None:
    """Without X-CSRF-Token, or with a wrong one, no POST reaches the operations."""
    missing = browser.post(path, body, headers={"X-CSRF-Token": ""})
    wrong = browser.post(path, body, headers={"X-CSRF-Token": "0" * 64})
    assert (missing.status, wrong.status) == (403, 403)
    assert "X-CSRF-Token" in missing.json()["detail"]
    assert ops.calls == []


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "https://127.0.0.1:8765", "http://127.0.0.1:9999", "null", ""],
)
def test_cookie_posts_from_another_origin_are_403(
    browser: Client, ops: FakeOps, origin: str
) -> None:
    """The Origin must be the request's own scheme://host; missing counts as wrong."""
    reply = browser.post("/api/v1/runs/r1/cancel", headers={"Origin": origin})
    assert reply.status == 403 and "Origin" in reply.json()["detail"]
    assert ops.calls == []


def test_cross_site_fetches_are_403_even_with_a_matching_origin(browser: Client) -> None:
    """Sec-Fetch-Site: cross-site is refused."""
    reply = browser.post("/api/v1/runs/r1/cancel", headers={"Sec-Fetch-Site": "cross-site"})
    assert reply.status == 403


def test_default_ports_are_the_same_origin(app: WebApp) -> None:
    """http://localhost and Host localhost:80 are one origin."""
    browser = Client(app, host="localhost:80")
    browser.login(TOKEN)
    reply = browser.post("/api/v1/runs/r1/cancel", headers={"Origin": "http://localhost"})
    assert reply.status == 200


def test_bearer_posts_skip_csrf_and_act_as_api(app: WebApp, ops: FakeOps) -> None:
    """A bearer POST needs no CSRF token or Origin, and is recorded as "api"."""
    assert Client(app, token=TOKEN).post("/api/v1/runs/r1/retry").status == 200
    assert ops.last("retry") == (("r1",), {"actor": "api"})


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"],
)
def test_posts_that_are_not_json_are_415(
    app: WebApp, browser: Client, ops: FakeOps, content_type: str | None
) -> None:
    """Only application/json bodies are accepted, from bearer clients and browsers."""
    for client in (Client(app, token=TOKEN), browser):
        reply = client.request(
            "POST", "/api/v1/runs/r1/cancel", body=b"{}", content_type=content_type
        )
        assert reply.status == 415 and reply.content_type == "application/problem+json"
    assert ops.calls == []


def test_json_with_a_charset_is_json(app: WebApp) -> None:
    """Content-Type parameters do not matter."""
    reply = Client(app, token=TOKEN).request(
        "POST", "/api/v1/runs/r1/cancel", body=b"{}", content_type="application/json; charset=utf-8"
    )
    assert reply.status == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.2", None])
def test_requests_for_other_hosts_are_400(app: WebApp, host: str | None) -> None:
    """DNS rebinding: a Host that is not ours (or none) is refused, even with the token."""
    reply = Client(app, token=TOKEN, host=host).get("/api/v1/runs")
    assert reply.status == 400 and "Host" in reply.json()["detail"]
    login = Client(app, host=host).get("/", query=f"token={TOKEN}")
    assert login.status == 400 and login.header("Set-Cookie") is None


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:1", "127.0.0.1", "[::1]:8765"])
def test_loopback_hosts_are_accepted_on_any_port(app: WebApp, host: str) -> None:
    """Loopback names pass, whatever the port."""
    assert Client(app, token=TOKEN, host=host).get("/api/v1/runs").status == 200


def test_allowed_hosts_extend_the_list_and_star_accepts_any(ops: FakeOps) -> None:
    """allowed_hosts adds names (port ignored); "*" leaves Host checks to the host app."""
    named = fake_app(ops, token=TOKEN, allowed_hosts=["ops.example.com:443", "::2"])
    assert Client(named, token=TOKEN, host="ops.example.com").get("/api/v1/runs").status == 200
    assert Client(named, token=TOKEN, host="[::2]:80").get("/api/v1/runs").status == 200
    assert Client(named, token=TOKEN, host="other.example").get("/api/v1/runs").status == 400
    anything = fake_app(ops, token=TOKEN, allowed_hosts=["*"])
    assert Client(anything, token=TOKEN, host="x.example").get("/api/v1/runs").status == 200


@pytest.mark.parametrize(("path", "body"), POSTS)
def test_read_only_refuses_every_post(ops: FakeOps, path: str, body: object) -> None:
    """read_only: every POST is 403 for bearer and cookie clients alike; GETs work."""
    app = fake_app(ops, token=TOKEN, read_only=True)
    browser = Client(app)
    browser.login(TOKEN)
    for client in (Client(app, token=TOKEN), browser):
        reply = client.post(path, body)
        assert reply.status == 403 and "read-only" in reply.json()["detail"]
        for get in GET_PATHS:
            assert client.get(get).status == 200, get
    assert browser.get("/api/v1/session").json()["read_only"] is True
    assert [name for name, _, _ in ops.calls] == ["list_runs", "stats"] * 2


def _every_kind_of_reply(app: WebApp, browser: Client) -> list[Reply]:
    bearer = Client(app, token=TOKEN)
    return [
        browser.get("/"),
        browser.get("/api/v1/runs"),
        browser.post("/api/v1/runs/r1/cancel", headers={"X-CSRF-Token": "x"}),
        bearer.post("/api/v1/runs/r1/cancel", body=b"x", content_type="text/plain"),
        bearer.get("/api/v1/nothing"),
        bearer.request("DELETE", "/api/v1/runs"),
        bearer.request("OPTIONS", "/api/v1/runs", headers={"Origin": "http://evil.example"}),
        Client(app).get("/api/v1/runs"),
        Client(app).get("/"),
        Client(app).get("/", query=f"token={TOKEN}"),
        Client(app, host="evil.example").get("/"),
    ]


def test_every_response_carries_the_security_headers(app: WebApp, browser: Client) -> None:
    """CSP, nosniff and no-referrer on pages, API answers, errors and redirects alike."""
    for reply in _every_kind_of_reply(app, browser):
        assert reply.header("Content-Security-Policy") == (
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
        )
        assert reply.header("X-Content-Type-Options") == "nosniff"
        assert reply.header("Referrer-Policy") == "no-referrer"


def test_no_response_ever_carries_cors_headers(app: WebApp, browser: Client) -> None:
    """No Access-Control-* header, not even for a preflight from another origin."""
    for reply in _every_kind_of_reply(app, browser):
        names = [name.lower() for name, _ in reply.headers]
        assert not [name for name in names if name.startswith("access-control-")]


def test_api_responses_are_never_stored(browser: Client) -> None:
    """Cache-Control: no-store on API answers (they hold payloads)."""
    assert browser.get("/api/v1/runs").header("Cache-Control") == "no-store"
    assert browser.get("/api/v1/nothing").header("Cache-Control") == "no-store"


def test_unknown_methods_are_405_with_allow(app: WebApp) -> None:
    """A known path with the wrong method says which methods it takes."""
    reply = Client(app, token=TOKEN).request("DELETE", "/api/v1/runs")
    assert reply.status == 405 and reply.header("Allow") == "GET, POST"


def test_the_app_mounts_under_a_prefix(ops: FakeOps) -> None:
    """Under SCRIPT_NAME /ops/durable: the cookie's Path, redirects and Location headers
    carry the prefix, and routes match PATH_INFO."""
    app = fake_app(ops, token=TOKEN)
    client = Client(app, script_name="/ops/durable")
    bare = client.get("", query="a=1")
    assert bare.status == 308 and location_path(bare) == "/ops/durable/?a=1"
    login = client.login(TOKEN)
    assert location_path(login) == "/ops/durable/"
    cookie = SimpleCookie(login.header("Set-Cookie"))[app.guard.cookie]
    assert cookie["path"] == "/ops/durable"
    assert client.get("/api/v1/runs").json()["items"][0]["id"] == "r1"
    started = client.post("/api/v1/runs", {"workflow": "app.flow"}, headers={"Origin": ORIGIN})
    assert started.status == 201
    assert started.header("Location") == "/ops/durable/api/v1/runs/r1"


def test_unexpected_errors_are_500_without_details(
    app: WebApp, ops: FakeOps, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception in a handler is logged, and the client gets a bare 500 problem."""
    ops.fail_with = RuntimeError("secret internals at /srv/app.py line 3")
    reply = Client(app, token=TOKEN).get("/api/v1/runs")
    assert reply.status == 500 and reply.content_type == "application/problem+json"
    assert b"secret" not in reply.body and b"Traceback" not in reply.body
    assert "secret internals" in caplog.text


def test_database_outages_are_503(app: WebApp, ops: FakeOps) -> None:
    """A StorageError is a 503 problem with its (password-free) message."""
    ops.fail_with = StorageError("Cannot reach postgresql://app@db/app: connection refused.")
    reply = Client(app, token=TOKEN).get("/api/v1/runs")
    assert reply.status == 503 and "connection refused" in reply.json()["detail"]
