"""The dashboard mounted in Django under a prefix with `durable.web.django_urls`,
driven by Django's test client, with Django's own middleware (CSRF, common, security)
in front of it."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable.web import django_urls, make_app
from tests.conftest import BACKENDS
from tests.web.client import Reply
from tests.web.mount_checks import PREFIX, TOKEN, check_mount, greet
from tests.web.test_asgi import until

django = pytest.importorskip("django")  # in the test extra; CI always has it

#: the URLconf module the settings name; each test fills in its urlpatterns.
URLCONF = "tests.web._django_urls"


def _configure() -> None:
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(
        DEBUG=False,
        SECRET_KEY="tests-only",
        ALLOWED_HOSTS=["127.0.0.1"],
        ROOT_URLCONF=URLCONF,
        MIDDLEWARE=[
            "django.middleware.security.SecurityMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.middleware.clickjacking.XFrameOptionsMiddleware",
        ],
        INSTALLED_APPS=[],
        DATABASES={},
        USE_TZ=True,
    )
    django.setup()


@pytest.fixture
def urlconf(engine: durable.Engine) -> Iterator[types.ModuleType]:
    """The project's urls.py: a view of its own that dispatches, and the dashboard."""
    _configure()
    from django.http import JsonResponse
    from django.urls import clear_url_caches, include, path

    def start_greeting(request: Any, name: str) -> Any:
        return JsonResponse({"run": durable.dispatch(greet, name).id})

    module = types.ModuleType(URLCONF)
    dashboard = make_app(engine, token=TOKEN, allowed_hosts=("*",))  # Django checks Host
    module.urlpatterns = [  # type: ignore[attr-defined]
        path("greetings/<str:name>", start_greeting),
        path(PREFIX.lstrip("/") + "/", include(django_urls(dashboard))),
    ]
    module.dashboard = dashboard  # type: ignore[attr-defined]
    sys.modules[URLCONF] = module
    clear_url_caches()
    try:
        yield module
    finally:
        del sys.modules[URLCONF]
        clear_url_caches()


def sender(handler: str) -> Any:
    """`check_mount`'s send through Django's test client for its WSGI handler, or its
    AsyncClient for its ASGI handler (each request on an event loop of its own)."""
    from django.test import AsyncClient, Client

    class HostedAsyncClient(AsyncClient):  # type: ignore[misc]
        """Django's AsyncClient always sends "host: testserver": a Host the test
        gives replaces it (else ASGIRequest joins both into one bad value)."""

        async def request(self, **scope: Any) -> Any:
            hosts = [value for name, value in scope["headers"] if name == b"host"]
            others = [(name, value) for name, value in scope["headers"] if name != b"host"]
            scope["headers"] = [*others, (b"host", hosts[-1])]
            return await super().request(**scope)

    client = Client(enforce_csrf_checks=True)
    aclient = HostedAsyncClient(enforce_csrf_checks=True)

    def send(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        kind = headers.pop("Content-Type", "application/octet-stream")
        if handler == "wsgi":
            client.cookies.clear()  # the checks send their own Cookie header
            reply = client.generic(method, path, body, content_type=kind, headers=headers)
        else:
            # It still sends an empty cookie header before the test's: two cookie
            # headers, which Django's ASGIRequest joins with "," (django_urls undoes it).
            aclient.cookies.clear()
            call = aclient.generic(method, path, body, content_type=kind, headers=headers)
            reply = asyncio.run(call)
        return Reply(reply.status_code, list(reply.items()), reply.content)

    return send


@pytest.mark.parametrize("handler", ["wsgi", "asgi"])
@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_dashboard_mounted_in_django_keeps_prefix_and_security(
    engine: durable.Engine, urlconf: types.ModuleType, handler: str
) -> None:
    """Under a Django include, through Django's WSGI and ASGI handlers, every link,
    asset, redirect and cookie stays under the prefix; the token and the dashboard's
    own CSRF and Origin rules hold (Django's CSRF middleware does not refuse the
    dashboard's POSTs), and ALLOWED_HOSTS is enforced."""
    run_id = check_mount(sender(handler))
    assert engine.reread(run_id).status == "queued"
    started = sender(handler)("GET", "/greetings/ada", {"Host": "127.0.0.1"}, b"")
    dispatched = started.json()["run"]
    assert engine.reread(dispatched).workflow == greet.name


def test_django_urls_takes_only_a_web_app(memory_engine: durable.Engine) -> None:
    """django_urls() of an engine is a TypeError that says to call make_app first."""
    with pytest.raises(TypeError, match=r"django_urls\(make_app\(engine"):
        django_urls(memory_engine)  # type: ignore[arg-type]


@durable.workflow
def said(words: list[str]) -> int:
    for word in words:
        durable.stream("words").write(word)
    return len(words)


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_a_stream_through_django_is_streamed(
    engine: durable.Engine, urlconf: types.ModuleType
) -> None:
    """A run's stream as Server-Sent Events through the include: a streaming response
    (not one body joined first), each value an event, then the end."""
    from django.test import Client

    handle = durable.dispatch(said, ["a", "b"])
    with durable.Worker(engine, poll=0.02):
        handle.result(timeout=20)
    reply = Client().get(
        f"{PREFIX}/api/v1/runs/{handle.id}/streams/words",
        headers={"Authorization": f"Bearer {TOKEN}", "Host": "127.0.0.1"},
    )
    assert reply.status_code == 200 and reply.streaming
    text = b"".join(reply.streaming_content).decode()
    assert 'data: {"offset":1,"value":"b"' in text and text.endswith(
        'event: end\ndata: {"ended":true}\n\n'
    )


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_live_updates_through_django_are_streamed(
    engine: durable.Engine, urlconf: types.ModuleType
) -> None:
    """api/v1/live through the include: a streaming response whose first pieces are the
    retry line and the version; closing it (the client left) ends the watch."""
    from django.test import Client

    reply = Client().get(
        f"{PREFIX}/api/v1/live", headers={"Authorization": f"Bearer {TOKEN}", "Host": "127.0.0.1"}
    )
    assert reply.status_code == 200 and reply.streaming
    assert reply["Content-Type"] == "text/event-stream; charset=utf-8"
    pieces = iter(reply.streaming_content)
    assert next(pieces) == b"retry: 2000\n\n"
    assert next(pieces).startswith(b'data: {"version":')
    reply.close()


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_live_updates_through_djangos_asgi_handler_come_as_they_are_made(
    engine: durable.Engine, urlconf: types.ModuleType
) -> None:
    """Under Django's own ASGI handler (not the test client), api/v1/live sends its
    pieces as they come: Django consumes a synchronous iterator whole before sending
    any of it (a live stream never ends), so the include hands it an asynchronous one,
    whose pieces are awaited from threads outside Django's. The client leaving ends
    the watch."""
    from django.core.handlers.asgi import ASGIHandler

    sent: list[dict[str, Any]] = []
    headers = [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {TOKEN}".encode())]
    path = f"{PREFIX}/api/v1/live"
    scope = {
        "type": "http", "method": "GET", "scheme": "http", "http_version": "1.1",
        "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
        "headers": headers, "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
    }  # fmt: skip

    async def main() -> None:
        leave = asyncio.Event()

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if len(sent) >= 3:  # the start, the retry line, the first version
                leave.set()

        handled = asyncio.ensure_future(ASGIHandler()(scope, until(leave), send))
        try:
            await asyncio.wait_for(leave.wait(), timeout=10)
        finally:
            await asyncio.wait_for(handled, timeout=30)  # the client left: it ends

    asyncio.run(main())
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b"retry: 2000\n\n"
    assert sent[2]["body"].startswith(b'data: {"version":')
    assert not urlconf.dashboard.live.watching  # the stream was closed: the watch ended
