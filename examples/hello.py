"""The first workflow: three durable task calls, two of them in parallel.

    python examples/hello.py

Runs on the embedded default, a SQLite file `durable.db` in the working directory.
Run it twice: the second time the run with id "hello-3" is already finished, so its
stored result comes back and no task runs again.
"""

from __future__ import annotations

import durable
from durable import execute, task, workflow


@task
def fetch(n: int) -> int:
    print(f"  fetch({n}) runs")
    return n * 10


failures_left = 1  # the first attempt fails, to show a retry


@task(retry=dict(attempts=5, backoff="exponential", initial=0.05, max_delay=1, jitter=True))
def flaky(n: int) -> int:
    global failures_left
    if failures_left:
        failures_left -= 1
        print(f"  flaky({n}) fails; it will be retried")
        raise ConnectionError("the network blinked")
    print(f"  flaky({n}) runs")
    return n + 1


@workflow
def pipeline(n: int) -> list[int]:
    a = fetch(n)  # recorded at position 0
    b, c = execute(fetch.bind(a), flaky.bind(a))  # parallel: positions 1 and 2
    return [a, b, c]


if __name__ == "__main__":
    print("pipeline(3), run id 'hello-3':")
    print("result:", execute(pipeline, 3, id="hello-3"))
    print("history:")
    for step in durable.get_engine().backend.load_history("hello-3"):
        print(
            f"  {step.position}: {step.kind} {step.name} {step.status}, {step.attempts} attempt(s)"
        )
