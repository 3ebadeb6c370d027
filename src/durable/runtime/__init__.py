"""Layer 3, runtime: executing runs. The run context, what each kind of durable call
does, one execution of a run, the engine (runs, leases, heartbeat, recovery) and the
worker. It imports `durable.backends`, `durable.core` and `durable.errors` only."""
