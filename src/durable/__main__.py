"""`python -m durable`: the command line."""

from durable.cli.main import main

raise SystemExit(main())
