"""Streams out of a running workflow: the stored form of their values, and their names.

A run's stream is an ordered list of values, written by its workflow code or its task
bodies (`durable.stream(name).write(value)`) and read live by anyone
(`Handle.stream(name)`). Each stored item has an offset (0, 1, 2... per stream, in
commit order), a payload (`core/serde.py`, like every value durable stores) and the
time it was written; a stream ends with a *close marker*, an item with no payload.

A workflow's writes are numbered by the workflow code itself (``seq``: 0, 1, 2... per
stream and run, the same on every replay), so a replay recognises the values it wrote
before and writes nothing again. A task body's writes carry no number: each attempt's
values are appended as written, and a retried attempt appends after them.
"""

from __future__ import annotations

from dataclasses import dataclass

from durable.errors import InvalidValue

from .text import check_text

#: The longest stream name, in characters (it is part of every row's key).
NAME_LIMIT = 200
#: The most items one read of a stream returns.
PAGE = 500


@dataclass(frozen=True, slots=True)
class StreamItem:
    """One stored item of a stream: a value, or (``payload is None``) its close marker."""

    offset: int
    payload: bytes | None
    written_at: float

    @property
    def closed(self) -> bool:
        """Whether this item is the stream's close marker."""
        return self.payload is None


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """What a run's stream holds: its name, how many values, whether it is closed."""

    name: str
    length: int
    closed: bool


def check_stream_name(name: str) -> str:
    """*name*, if it can name a stream: a non-empty str of at most `NAME_LIMIT`
    characters that any database can store.

    Raises:
        InvalidValue: what is wrong with it.
    """
    check_text(name, "a stream name")
    if not name:
        raise InvalidValue(
            "A stream name must not be empty: name the stream after what it carries, "
            'e.g. durable.stream("tokens").'
        )
    if len(name) > NAME_LIMIT:
        raise InvalidValue(
            f"A stream name must be at most {NAME_LIMIT} characters, not {len(name)} "
            f"({name[:40]!r}...): it is part of the key of every value stored."
        )
    return name


def stream_topic(run_id: str) -> str:
    """The wake-up topic a write to any stream of *run_id* notifies (see `backends/_hub.py`)."""
    return f"stream:{run_id}"


def place(
    run_id: str,
    name: str,
    payload: bytes | None,
    *,
    last: int | None,
    closed: bool,
    found: int | None,
) -> tuple[int, bool]:
    """Where a write goes, given the stream's *last* offset (None: empty), whether it is
    *closed*, and the offset *found* for the write's ``seq`` (None: not written yet).
    The rule every backend applies, with the run's row (or lock) held.

    Returns:
        (offset, write?): the offset of the item, and whether to write it (False: the
        item is stored already, or the stream is closed already and this closes it).

    Raises:
        InvalidValue: a value written after the close marker.
    """
    if found is not None:
        return found, False
    if closed:
        if payload is None:
            return last if last is not None else 0, False
        raise InvalidValue(
            f"Stream {name!r} of run {run_id!r} is closed: nothing more can be written "
            "to it. Write to a stream of another name, or close it only once all its "
            "values are written.",
            run_id=run_id,
            stream=name,
        )
    return (0 if last is None else last + 1), True
