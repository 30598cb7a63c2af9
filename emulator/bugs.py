"""The emulator's own bugs as exceptions (never protocol findings).

In a module of their own that ``setup.py`` never compiles: mypyc's native classes cannot derive
from ``RuntimeError`` or ``AssertionError``, so the compiled core raises these plain Python
classes.  Each is re-exported where it used to be defined (``emulator.follower``,
``emulator.checker``).
"""


class EmulatorBug(RuntimeError):
    """A precondition of the emulator's own code was broken (not a protocol finding)."""


class UndeclaredChange(AssertionError):
    """A step changed an invariant's input its declaration (``invariants.STEP_CHANGES``) misses, or
    full judging found a violation incremental judging skipped: the declarations are wrong."""
