"""`python -m durable`: the command line."""

from durable.cli import main

raise SystemExit(main())
