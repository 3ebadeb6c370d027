"""`durable queues`: each queue's depth, running runs, limits, rate, the age of its
oldest queued run and its running runs per key (docs/concepts/flow-control.md)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from .common import add_db_option
from .output import Column, add_output_option, field, print_items, seconds
from .runs import operations

#: The fields of a Queue view, in contract order: the csv header.
QUEUE_FIELDS = (
    "name",
    "queued",
    "running",
    "concurrency",
    "key_concurrency",
    "rate",
    "key_rate",
    "oldest_queued_at",
    "oldest_queued_age",
    "keys",
)

QUEUES_EXAMPLES = """\
examples:
  durable queues
  durable queues -o json | jq -r '.items[] | select(.queued > 1000) | .name'
  durable queues --db postgresql://app@db/app -o csv > queues.csv

A queue is listed if runs wait in it or run from it, or if it declares limits
(durable.queue(...)). QUEUED is its depth; RUNNING counts its runs holding a slot (on a
lease that has not expired). LIMIT and KEY LIMIT are its concurrency and key_concurrency,
RATE its rate and KEY RATE each key's ("-": no limit). OLDEST is how long its oldest
queued run has waited. KEYS are the keys of its running runs and how many run per key,
the busiest first (at most 20).
"""


def keys_of(queue: Mapping[str, Any]) -> str:
    """KEYS: ``tenant-a=2, tenant-b=1``, or "-"."""
    keys = queue.get("keys") or {}
    return ", ".join(f"{key}={count}" for key, count in keys.items()) or "-"


QUEUE_COLUMNS = (
    Column("QUEUE", 32, field("name")),
    Column("QUEUED", 10, field("queued")),
    Column("RUNNING", 10, field("running")),
    Column("LIMIT", 10, field("concurrency")),
    Column("KEY LIMIT", 10, field("key_concurrency")),
    Column("RATE", 24, field("rate")),
    Column("KEY RATE", 24, field("key_rate")),
    Column("OLDEST", 10, field("oldest_queued_age", seconds)),
    Column("KEYS", 60, keys_of),
)


def add_commands(commands: Any) -> None:
    """Add ``queues`` to the parser."""
    listing: argparse.ArgumentParser = commands.add_parser(
        "queues",
        help="list the queues: depth, running, limits, rate, oldest wait, usage per key",
        description="List the queues, by name: how many runs wait (depth) and run, the limits\n"
        "each declares, how long its oldest queued run has waited, and its running runs\n"
        "per key.",
        epilog=QUEUES_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_option(listing)
    add_output_option(listing)
    listing.set_defaults(handler=run_queues)


def run_queues(args: argparse.Namespace) -> int:
    """`durable queues`: every queue in use or declaring limits, by name."""
    with operations(args) as ops:
        answer = {"items": ops.queues()}
    print_items(answer, args.output, QUEUE_COLUMNS, empty="No queues.", fields=QUEUE_FIELDS)
    return 0
