"""``--attr KEY=VALUE``: the attribute filter of `durable ls` and the bulk actions, and
attributes as people read them."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from durable.core.attributes import parse_filter


def add_attr_option(parser: argparse.ArgumentParser) -> None:
    """``--attr KEY=VALUE``, repeatable: runs holding every one."""
    parser.add_argument(
        "--attr",
        action=_Attributes,
        type=_pair,
        default={},
        metavar="KEY=VALUE",
        help="runs with this attribute (repeatable: all must match); matched as text, so "
        "n=5 finds the int 5 and the float 5.0, vip=true the bool True",
    )


def attributes_of(args: argparse.Namespace) -> dict[str, str]:
    """The ``--attr`` filters as a mapping, for `Operations.list_runs`."""
    return dict(args.attr)


class _Attributes(argparse.Action):
    """Collects ``--attr`` pairs into a dict; one key with two values is an error (a run
    holds one value per key, so nothing would match)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        key, value = values  # type: ignore[str-unpack, misc]
        chosen = dict(getattr(namespace, self.dest))
        if chosen.get(key, value) != value:
            parser.error(
                f"--attr {key}= is given twice ({chosen[key]!r} and {value!r}); a run holds "
                "one value per key, so none would match. Give it once."
            )
        chosen[key] = value
        setattr(namespace, self.dest, chosen)


def _pair(text: str) -> tuple[str, str]:
    try:
        return parse_filter(text)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None
