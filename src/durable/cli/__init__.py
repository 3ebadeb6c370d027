"""The `durable` command line (also `python -m durable`): `main.py` builds the parser
and runs a command; each command group is a module of its own."""
