"""Validates responses against the OpenAPI document the app serves.

Responses are checked against a strict copy of the document: every object schema that
lists properties rejects any other, so a field the API sends but the document does not
describe fails the test (the published document stays open for additions).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from importlib.resources import files
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from openapi_spec_validator import validate as validate_spec

from tests.web.client import Client, Reply


@functools.cache
def document() -> dict[str, Any]:
    """The packaged openapi.json, parsed."""
    loaded: dict[str, Any] = json.loads(files("durable.web").joinpath("openapi.json").read_text())
    return loaded


@functools.cache
def _strict() -> dict[str, Any]:
    strict = copy.deepcopy(document())
    _close(strict["components"]["schemas"])
    validate_spec(document())
    return strict


def _close(node: Any) -> None:
    if isinstance(node, dict):
        if "properties" in node and node.get("type") == "object":
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close(value)
    elif isinstance(node, list):
        for value in node:
            _close(value)


def _template(path: str) -> str | None:
    """The document's path template matching *path* (relative to /api/v1): the most
    specific one (the most literal text), as the app tries suffixed routes first."""
    templates: list[str] = sorted(
        document()["paths"], key=lambda t: (-len(re.sub(r"\{\w+\}", "", t)), t)
    )
    for template in templates:
        pattern = re.sub(r"\\\{\w+\\\}", ".+", re.escape(template))
        if re.fullmatch(pattern, path):
            return template
    return None


def check(method: str, path: str, reply: Reply) -> None:
    """Fail unless *reply* is documented for *method* on *path* and its body fits the
    schema documented for its status and content type."""
    template = _template(path.removeprefix("/api/v1"))
    assert template is not None, f"{path} is not in the OpenAPI document"
    operation = _strict()["paths"][template].get(method.lower())
    assert operation is not None, f"{method} {template} is not in the OpenAPI document"
    documented = operation["responses"].get(str(reply.status))
    assert documented is not None, f"{method} {template} -> {reply.status} is not documented"
    documented = _resolve(documented)
    content = documented.get("content")
    if not content:
        assert not reply.body, f"{method} {template} -> {reply.status} should have no body"
        return
    assert reply.content_type in content, f"{reply.content_type} for {method} {template}"
    schema = {**content[reply.content_type]["schema"], "components": _strict()["components"]}
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    errors = sorted(validator.iter_errors(reply.json()), key=lambda e: list(e.path))
    assert not errors, f"{method} {path} -> {reply.status}: " + "; ".join(
        f"{list(e.path)}: {e.message}" for e in errors[:5]
    )


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        _, *parts = node["$ref"].split("/")
        target: Any = _strict()
        for part in parts:
            target = target[part]
        node = target
    return node


class CheckedClient(Client):
    """A client that validates every API response it gets against the document."""

    def request(self, method: str, path: str, **kwargs: Any) -> Reply:
        reply = super().request(method, path, **kwargs)
        if path.startswith("/api/v1/"):
            check(method, path, reply)
        return reply
