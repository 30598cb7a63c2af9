"""``python -m replemu`` is the ``replemu`` command."""

from .cli import entry

entry()
