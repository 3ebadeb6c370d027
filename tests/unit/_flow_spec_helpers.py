"""Shared by the flow-file tests (`durable.flows.spec`): example files and writing one."""

from __future__ import annotations

from pathlib import Path

RELEASE = """\
[flow]
name = "release"
max_running = 4
description = "Ship it"
notify = ["./notify.sh"]
log_limit = "2MB"

[task.build]
command = ["make", "dist"]
[task.unit]
command = ["pytest", "-q"]
depends_on = ["build"]
retry = { attempts = 2, delay = "10s" }
timeout = "30m"
[task.ui_check]
kind = "human"
assignee = "qa@example.com"
form = { approved = "bool", notes = "str?" }
depends_on = ["build"]
[task.upload]
command = ["./upload.sh", "{flow.id}"]
depends_on = ["unit", "ui_check"]
env = { TARGET = "prod" }
cwd = "dist"
[task.etl]
flow = "sub.toml"
depends_on = ["build"]
[task.announce]
command = "echo done > {task.name}.txt"
shell = true
depends_on = ["upload"]
"""

SUB = """\
[flow]
name = "etl"
[task.extract]
command = ["extract"]
"""

HEAD = '[flow]\nname = "f"\n'  # lines 1 and 2
A = '[task.a]\ncommand = ["a"]\n'


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path
