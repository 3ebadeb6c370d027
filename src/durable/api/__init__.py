"""Layer 4, the public verbs: @workflow and @task, execute / dispatch / wait / send,
handles. Thin, on top of `durable.runtime`; `durable` re-exports them."""
