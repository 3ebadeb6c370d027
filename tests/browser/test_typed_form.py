"""A typed event's form in real headless Chromium (see conftest.py): built from the
schema's JSON Schema (text, number, checkbox, select, date, a nested fieldset, required
marks, help text), checked in the browser, refused fields shown inline from the
server's 400, and the run resumed with the right instance."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

import pytest
from pydantic import BaseModel, Field, field_validator

import durable
from durable import wait, workflow
from tests.browser.conftest import Dashboard, Page

pytestmark = pytest.mark.browser


class Priority(enum.Enum):
    LOW = "low"
    URGENT = "urgent"


class Address(BaseModel):
    street: str
    city: str = Field(description="Where the parcel goes")


class Review(BaseModel):
    reviewer: str = Field(description="Who reviewed it")
    approved: bool
    amount: float = Field(ge=0)
    items: int
    priority: Priority
    due: dt.date
    address: Address
    note: str | None = None
    urgency: Priority = Field(Priority.LOW, description="How soon it ships")

    @field_validator("reviewer")
    @classmethod
    def _no_robots(cls, value: str) -> str:
        if value == "robot":
            raise ValueError("a person must review it")
        return value


@workflow(events={"review": Review})
def reviewed(order: str) -> dict[str, Any]:
    review = wait("review")
    return {
        "order": order,
        "type": type(review).__name__,
        "due": type(review.due).__name__,
        "priority": review.priority.name,
        "city": review.address.city,
        "dump": review.model_dump(mode="json"),
    }


def fill(page: Page, field: str, text: str) -> None:
    box = page.js("return document.getElementById(arguments[0]);", f"event-field-{field}")
    box.clear()
    box.send_keys(text)


def error_of(page: Page, field: str) -> str:
    return str(
        page.js(
            "return document.querySelector(`.field-error[data-loc='${arguments[0]}']`)"
            ".textContent;",
            field,
        )
    )


def test_the_form_of_a_typed_event_resumes_the_run_with_the_instance(
    page: Page, dashboard: Dashboard
) -> None:
    run_id = "order-typed-review"
    durable.dispatch(reviewed, run_id, id=run_id)
    dashboard.wait_status(run_id, "waiting")
    page.open_run(run_id)
    page.wait_js("!document.querySelector('#event-fields').hidden", "the typed form")
    assert not page.displayed("#event-json"), "no JSON box for a typed event"
    assert not page.displayed("#event-approve")

    kinds = page.js(
        "return Object.fromEntries(Array.from(document.querySelectorAll("
        "'#event-fields [id^=event-field-]')).map(e => [e.id.slice(12),"
        " e.tagName === 'INPUT' ? e.type : e.tagName.toLowerCase()]));"
    )
    assert kinds == {
        "reviewer": "text",
        "approved": "checkbox",
        "amount": "number",
        "items": "number",
        "priority": "select",
        "due": "date",
        "address": "fieldset",
        "address.street": "text",
        "address.city": "text",
        "note": "text",
        "urgency": "select",
    }
    assert page.attribute("#event-field-amount", "min") == "0"
    assert page.attribute("#event-field-items", "step") == "1"
    options = page.js(
        "return Array.from(document.querySelector('#event-field-priority').options)"
        ".map(o => o.textContent);"
    )
    assert options == ["—", "low", "urgent"]
    # a default beside a $ref (an enum field with a default) is preselected
    urgency = page.js(
        "const s = document.querySelector('#event-field-urgency');"
        " return s.options[s.selectedIndex].textContent;"
    )
    assert urgency == "low"
    assert "Address" in page.text("#event-field-address legend")
    form = page.text("#event-fields")
    assert "Who reviewed it" in form and "Where the parcel goes" in form, "help text"
    assert "How soon it ships" in form
    required = page.js(
        "return Array.from(document.querySelectorAll('#event-fields [required]'))"
        ".map(e => e.id.slice(12));"
    )
    assert required == [
        "reviewer",
        "amount",
        "items",
        "priority",
        "due",
        "address.street",
        "address.city",
    ]

    # the browser refuses what it can tell is wrong, and asks nothing
    fill(page, "amount", "-3")
    page.click("#event-send")
    page.wait_js("!document.querySelector('#event-error').hidden", "the field problems")
    assert error_of(page, "reviewer") == "Field required"
    assert error_of(page, "amount") != "" and error_of(page, "address.city") == "Field required"
    assert not page.js("return document.querySelector('#confirm').open")

    # filled in; the server refuses what only it knows (a validator), next to the field
    fill(page, "reviewer", "robot")
    page.click("#event-field-approved")
    fill(page, "amount", "12.5")
    fill(page, "items", "3")
    page.js("arguments[0].value = '1'", page.find("#event-field-priority"))  # "urgent"
    page.js("arguments[0].value = '2026-03-01'", page.find("#event-field-due"))
    fill(page, "address.street", "1 Main St")
    fill(page, "address.city", "Lyon")
    page.find("#event-sender").clear()
    page.find("#event-sender").send_keys("dana")
    page.click("#event-send")
    page.confirm()
    page.wait_js(
        "document.querySelector(\".field-error[data-loc='reviewer']\").textContent !== ''",
        "the server's error next to the reviewer",
    )
    assert "a person must review it" in error_of(page, "reviewer")
    assert error_of(page, "amount") == ""
    assert dashboard.engine.backend.events(run_id) == [], "nothing stored"
    # The browser logs the refused request; it is this one, and expected (the page's
    # fixture fails a test on any other error the page logged).
    logged = [e["message"] for e in page.driver.get_log("browser") if e["level"] == "SEVERE"]
    assert logged and all(
        f"/api/v1/runs/{run_id}/events" in line and "400" in line for line in logged
    )

    fill(page, "reviewer", "Dana")
    page.click("#event-send")
    page.confirm()
    dashboard.wait_status(run_id, "completed")
    assert durable.get(run_id).result(timeout=5) == {
        "order": run_id,
        "type": "Review",
        "due": "date",
        "priority": "URGENT",
        "city": "Lyon",
        "dump": {
            "reviewer": "Dana",
            "approved": True,
            "amount": 12.5,
            "items": 3,
            "priority": "urgent",
            "due": "2026-03-01",
            "address": {"street": "1 Main St", "city": "Lyon"},
            "note": None,
            "urgency": "low",
        },
    }
    [event] = dashboard.engine.backend.events(run_id)
    assert event.sender == "dana"
