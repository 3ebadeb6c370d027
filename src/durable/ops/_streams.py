"""A run's streams for people and API clients: their names and lengths, and their items
followed live, each value decoded in view mode (`_values.value`: nothing unpickled, no
class looked up, never failing)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from durable.core.streams import StreamItem, check_stream_name
from durable.errors import InvalidValue
from durable.runtime.engine import Engine
from durable.runtime.streams import follow, follow_async

from ._errors import BadRequest, NotFound, no_run
from ._values import iso, value


def streams(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    """The run's streams by name: ``{"name", "length", "closed"}`` each.

    Raises:
        NotFound: no run has this id.
    """
    _known(engine, run_id)
    return [
        {"name": info.name, "length": info.length, "closed": info.closed}
        for info in engine.backend.streams(run_id)
    ]


def items(engine: Engine, run_id: str, name: str, offset: int, *, idle: float) -> Items:
    """Stream *name* of the run from *offset*, live (see `runtime.streams.follow`):
    ``{"offset", "value", "written_at"}`` per value, ``{"offset", "closed": True}`` for
    the close marker (the last item), None after *idle* seconds of nothing new. Ends
    at the close marker or once the finished run's values are read. Iterate it in a
    thread, or ``async for`` on an asyncio loop, where waiting for news holds no thread.

    Raises:
        BadRequest: a bad stream name.
        NotFound: no run has this id (checked before the first item).
    """
    try:
        check_stream_name(name)
    except InvalidValue as error:
        raise BadRequest(str(error)) from None
    _known(engine, run_id)
    return Items(engine, run_id, name, offset, idle)


class Items:
    """The items of one stream from an offset, to iterate once (`items`)."""

    def __init__(self, engine: Engine, run_id: str, name: str, offset: int, idle: float) -> None:
        self._where = (engine, run_id, name, offset)
        self._idle = idle

    def __iter__(self) -> Iterator[dict[str, Any] | None]:
        for item in follow(*self._where, idle=self._idle):
            yield _shown(item)

    async def __aiter__(self) -> AsyncGenerator[dict[str, Any] | None, None]:
        followed = follow_async(*self._where, idle=self._idle)
        async with contextlib.aclosing(followed):
            async for item in followed:
                yield _shown(item)


def _shown(item: StreamItem | None) -> dict[str, Any] | None:
    if item is None:
        return None
    if item.payload is None:
        return {"offset": item.offset, "closed": True}
    return {"offset": item.offset, "value": value(item.payload), "written_at": iso(item.written_at)}


def _known(engine: Engine, run_id: str) -> None:
    if engine.backend.get_run(run_id) is None:
        raise NotFound(no_run(run_id))
