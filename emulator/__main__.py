"""``python -m emulator`` is ``replemu``."""

from .cli import entry

entry()
