"""set_attributes: what a run is searched by, set from its own workflow."""

from __future__ import annotations

from collections.abc import Mapping

from durable.core.attributes import AttributeValue, check_attributes
from durable.errors import DurableError
from durable.runtime import attributes
from durable.runtime.context import RunContext, current


def set_attributes(
    values: Mapping[str, AttributeValue] | None = None, /, **more: AttributeValue
) -> None:
    """Set attributes on the run of the workflow calling this: ``durable ls --attr
    customer=c-42``, ``GET /api/v1/runs?attr.customer=c-42`` and the dashboard find it
    by them. ``set_attributes(customer="c-42", vip=True)``, or a mapping for keys that
    are not Python names: ``set_attributes({"order-id": 17})``.

    Values are str, int, float or bool. A key already set takes the new value; other
    keys stay. The call is recorded at its position: written once, with the step that
    records it, in one transaction, and not again on replay (changing the values of a
    call a run already made is a divergence, as for any durable call). A run's
    attributes go with it through continue-as-new and into a fork.

    Raises:
        TypeError: a value is not a str, int, float or bool; nothing was set.
        ValueError: a key is empty, over 64 characters or holds ``=``; a value's text
            is over 256 characters; or the run would hold more than the engine's
            ``max_attributes`` (32 by default): nothing was set.
        DurableError: called outside a workflow (a task body, application code): give
            ``attributes=`` to `durable.dispatch` there instead.
    """
    context = current.get()
    if not isinstance(context, RunContext):
        raise DurableError(
            "set_attributes() sets the attributes of the workflow run calling it; here no "
            "workflow is running (a task body or application code). Pass attributes= to "
            "durable.dispatch, or call set_attributes() in the workflow."
        )
    given = {**(values or {}), **more}
    pairs = check_attributes(given, limit=context.host.max_attributes, what="set_attributes()")
    attributes.set_attributes(context, pairs)
