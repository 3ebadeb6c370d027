"""Process flows from a file (seed 001, MyProcessFlow): a DAG of command-line and human
tasks, run by durable's engine.

A flow is a workflow (``durable.flow``); each launch of a command task is a child
workflow (``durable.flow.node``) whose command runs in a process that outlives the
engine. See docs/concepts/flows.md and docs/reference/flow-file.md.
"""
