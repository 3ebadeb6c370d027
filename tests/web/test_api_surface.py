"""The REST API's surface against real runs on SQLite and PostgreSQL: the OpenAPI
document covers exactly the routes served (every answer is checked against it), health
and session, and the dashboard's static files."""

from __future__ import annotations

from durable.web._routes import route
from tests.web.api_world import TOKEN, World
from tests.web.client import Client
from tests.web.openapi_check import document


def test_the_document_covers_exactly_the_routes(world: World) -> None:
    """Every route the app serves is in openapi.json, and nothing else is."""
    served = {(r.method, r.pattern.pattern) for r in world.app._routes}
    any_handler = world.app._routes[0].handler
    documented = {
        (method.upper(), route(method.upper(), f"/api/v1{path}", any_handler).pattern.pattern)
        for path, item in document()["paths"].items()
        for method in item
    }
    assert served == documented
    assert world.api.get("/api/v1/openapi.json").json() == document()


def test_health_and_session(world: World) -> None:
    """Health answers ok; a bearer session needs no CSRF token."""
    assert world.api.get("/api/v1/health").json() == {"ok": True}
    assert world.api.get("/api/v1/session").json() == {"csrf": "", "read_only": False}


def test_static_files_are_served(world: World) -> None:
    """The page and its files, with content types, ETags and 304s; no path tricks."""
    client = Client(world.app, token=TOKEN)
    page = client.get("/")
    assert page.status == 200 and page.content_type == "text/html"
    tag = page.header("ETag")
    assert tag and client.get("/", headers={"If-None-Match": tag}).status == 304
    for trick in ["/static/../openapi.json", "/static/.hidden", "/static/", "/nope"]:
        assert client.get(trick).status == 404, trick
