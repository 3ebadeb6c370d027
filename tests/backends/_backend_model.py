"""The reference model of test_state_machine.py.

`Model` is the `Backend` contracts (src/durable/backends/_protocol/) written as plain
Python over the observable state only, one concept per base class:

* `ModelState` (_model_state.py): the state, over plain dictionaries;
* `ModelClaims` (_model_claims.py): runs created and claimed, and their leases;
* `ModelFlowControl` (_model_flow.py): queues' limits, keys, rates, debounced runs;
* `ModelWaits` (_model_waits.py): suspending and waking;
* `ModelHistory` (_model_history.py): steps recorded, heartbeats, events;
* `ModelEndings` (_model_endings.py): finishing, continuing as new, forking;
* `ModelControl` (_model_control.py): cancel, pause, resume, park;
* `ModelDump` (_model_dump.py): the state as `observe` reads it from a backend.

It is compared with the backends through the views of _model_views.py (`observe`
reads the same state from a real backend as a `Dump`, of _model_records.py), and
_model_invariants.py (`check_transition`) holds the invariants between two consecutive
states.
"""

from __future__ import annotations

from tests.backends._model_control import ModelControl
from tests.backends._model_dump import ModelDump
from tests.backends._model_endings import ModelEndings


class Model(ModelEndings, ModelControl, ModelDump):
    """The Backend contracts over plain dictionaries: the state every backend must show."""
