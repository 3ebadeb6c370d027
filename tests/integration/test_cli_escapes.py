"""Terminal control sequences in stored data (ids, event names, actors, senders, error
messages, values) never reach the operator's terminal raw: `durable ls`, `show`,
`history`, the bulk actions and the ``durable: <error>`` lines print them escaped
(``\\x1b``), on SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest

import durable
from durable.ops import Operations

from . import cli_app
from .cli_world import BOTH, Cli

#: Clear the screen, a hyperlink to a fake page, a C1 CSI, DEL, a carriage return that
#: would overwrite the line, a right-to-left override.
CLEAR = "\x1b[2J\x1b[H"
LINK = "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07"
OTHERS = "\x9b31m\x7f\rok\u202e"
RUN = f"evil{CLEAR}-1"
FAILED = f"bad{OTHERS}-2"
EVENT = f"approve{LINK}"
SENDER = f"mallory{CLEAR}"
ACTOR = f"eve{OTHERS}"
#: What must never be printed: C0 controls other than newline, DEL, C1, bidi controls.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def cli(engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    durable.dispatch(cli_app.completes, 1, id=RUN, queue="nobody")
    ops = Operations(engine)
    ops.send(RUN, EVENT, {"note": f"data{CLEAR}"}, sender=SENDER)
    ops.cancel(RUN, actor=ACTOR)
    with pytest.raises(ValueError, match="boom"):
        durable.execute(cli_app.fails, f"boom{LINK}{OTHERS}", id=FAILED)
    return Cli(capsys, url)


def _clean(text: str) -> str:
    found = RAW.search(text)
    assert found is None, f"raw {found[0]!r} printed in:\n{text!r}"
    return text


@BOTH
def test_ls_escapes_ids(cli: Cli) -> None:
    listing = cli("ls")
    assert listing.code == 0, listing.err
    assert "evil\\x1b[2J\\x1b[H-1" in _clean(listing.out)
    assert "bad\\x9b31m\\x7f\\rok\\u202e-2" in listing.out
    assert _clean(cli("ls", "--search", "evil").out).count("\n") == 2  # header and one


@BOTH
def test_show_escapes_ids_actors_senders_events_errors_and_values(cli: Cli) -> None:
    shown = cli("show", RUN)
    assert shown.code == 0, shown.err
    text = _clean(shown.out)
    assert "eve\\x9b31m\\x7f\\rok\\u202e" in text  # the cancel's actor
    assert "mallory\\x1b[2J" in text  # the sender, as the send's actor
    # The event name is in the send's detail, JSON text, which escapes it its own way.
    assert "approve\\u001b]8;;https://evil.example/" in text
    failed = cli("show", FAILED)
    assert failed.code == 0, failed.err
    text = _clean(failed.out)
    assert "ValueError: boom\\x1b]8;;" in text
    assert "traceback:" in text and "\n  " in text  # multi-line parts keep their lines


@BOTH
def test_history_escapes_names_and_results(cli: Cli) -> None:
    history = cli("history", FAILED)
    assert history.code == 0, history.err
    assert "boom\\x1b]8;;https://evil.example/\\x07" in _clean(history.out)


@BOTH
def test_bulk_actions_and_errors_escape_ids(cli: Cli) -> None:
    retried = cli("retry", "--all", "--search", "bad", "--yes")
    assert retried.code == 0, retried.err
    assert "bad\\x9b31m" in _clean(retried.out)
    _clean(retried.err)
    refused = cli("cancel", RUN)  # already cancelled: the error names the run
    assert refused.code != 0
    assert refused.err.startswith("durable: ") and "evil\\x1b[2J" in _clean(refused.err)
    missing = cli("send", f"nope{OTHERS}", "x")
    assert missing.code == 3 and "nope\\x9b31m" in _clean(missing.err)


@BOTH
def test_machine_formats_keep_the_data_exact(cli: Cli) -> None:
    """json and csv are for programs: they carry the stored text unchanged (JSON
    escapes control characters itself)."""
    page = cli("ls", "-o", "json").json()
    assert {item["id"] for item in page["items"]} >= {RUN, FAILED}
