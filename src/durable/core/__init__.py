"""Layer 1, core: pure values and rules. No threads of its own, no database, no clock
reads: records, call identity, payloads, the replay cursor, retry policies, ids, the
clock seam and the fault points. Everything here imports only `durable.errors` and
other core modules."""
