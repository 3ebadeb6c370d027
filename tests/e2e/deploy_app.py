"""A checkout workflow in three deploys, chosen by ``DURABLE_TEST_CODE``: v1 (no fraud
check), v2 (the check behind ``durable.patched``), v3 (``durable.deprecate_patch``).
Every task body appends ``order step code pid`` to the test's ledger."""

from __future__ import annotations

import os

import durable
from durable import task, workflow

CODE = os.environ.get("DURABLE_TEST_CODE", "v1")


@task
def act(order: str, step: str) -> str:
    """A task body that leaves a line in the ledger, saying which code ran it."""
    ledger = os.environ.get("DURABLE_TEST_LEDGER")
    if ledger:
        with open(ledger, "a") as file:
            file.write(f"{order} {step} {CODE} {os.getpid()}\n")
    return f"{step}:{order}"


@workflow
def checkout(order: str) -> list[str]:
    """Charge, (check for fraud), wait for the goods, ship."""
    done = [act(order, "charge")]
    if CODE == "v2":
        if durable.patched("fraud-check"):
            done.append(act(order, "fraud"))
    elif CODE == "v3":
        durable.deprecate_patch("fraud-check")
        done.append(act(order, "fraud"))
    durable.wait("packed")
    done.append(act(order, "ship"))
    return done
