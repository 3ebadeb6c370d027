"""Where flows keep their files on a machine, and the names they share.

Each launch of a command gets a directory under the state root (its pid file, exit
file and output); the root is read in the process that runs the command, so every
engine on one machine must use the same one to adopt the commands of an engine that
died. ``$DURABLE_FLOW_DIR`` sets it; the default is ``$XDG_STATE_HOME/durable/flows``
(``~/.local/state/durable/flows``): not a temporary directory, which a reboot may wipe
while a finished command's exit file is still unread.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

#: the workflow of a flow instance, of one launch of a command task, and the task that
#: runs the command; names stored in runs: keep them stable.
FLOW = "durable.flow"
NODE = "durable.flow.node"
COMMAND = "durable.flow.command"
NOTIFY = "durable.flow.notify"
#: the event every message to a flow run is sent as (its payload says which).
EVENT = "durable.flow"


def ended(task: str, run_id: str, outcome: dict[str, Any]) -> dict[str, Any]:
    """The message that tells a flow its task *task*'s launch *run_id* ended."""
    return {"op": "ended", "task": task, "run": run_id, "outcome": outcome}


def ended_key(run_id: str) -> str:
    """The key of launch *run_id*'s end: sent again, it is delivered once."""
    return f"{run_id}:ended"


#: the dashboard's address, for the link a human task's notification carries.
DASHBOARD_ENV = "DURABLE_DASHBOARD_URL"
DASHBOARD_DEFAULT = "http://127.0.0.1:8765/"  # where `durable ui` listens by default


def state_root() -> Path:
    """The directory under which this machine's command launches keep their files."""
    configured = os.environ.get("DURABLE_FLOW_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "durable" / "flows"


def launch_dir(run_id: str, token: str, position: int) -> Path:
    """The directory of the command started at *position* of node run *run_id*: fixed
    by these, so an engine that takes the run over after a crash finds it again.
    *token* is a uuid the node drew (and recorded) once: run ids repeat across
    databases, and after a purge, and a launch must never find another's files."""
    safe = re.sub(r"[^A-Za-z0-9._-]", lambda m: f"%{ord(m.group()):02x}", run_id)
    return state_root() / f"{safe}.{token}" / str(position)


def form_link(flow_id: str, task: str) -> str:
    """The dashboard link to a human task's form."""
    base = os.environ.get(DASHBOARD_ENV) or DASHBOARD_DEFAULT
    return f"{base.rstrip('/')}/#/flows/{flow_id}?task={task}"
