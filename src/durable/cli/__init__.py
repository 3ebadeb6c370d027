"""The `durable` command line (also `python -m durable`)."""

from .main import main

__all__ = ["main"]
