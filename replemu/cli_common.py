"""What every ``replemu`` command shares: the exit statuses (``replemu/cli.py`` says what each
means), the one-line report of a failure, and the check that an output path can be written.

``replemu/cli.py`` parses the arguments and dispatches; each command's body lives with the code
it drives (``replemu/replay.py``, ``stream.py``, ``compile.py``, ``campaign.py``, ``explore.py``,
``dashboard.py``, ``serve.py``), and all of them import this module, which imports none of them.
"""

from __future__ import annotations

import sys

EXIT_OK, EXIT_CHECK_FAILED, EXIT_INVALID, EXIT_FAILED = 0, 1, 2, 3

# The defaults of a generated workload, the same in replemu campaign, replemu stream --workload and
# the API's replemu.campaign (docs/api.md)
DEFAULT_SEED, DEFAULT_PARTITIONS, DEFAULT_PROFILE = 1, 100, "hard"


def fail(message: str, status: int = EXIT_INVALID) -> int:
    """Report bad input (or, with ``status`` 3, a failed job) on stderr; the command exits with ``status``."""
    print(message, file=sys.stderr)
    return status


def output_problem(path, flag: str, file: bool = False) -> str | None:
    """Why ``path`` (a directory, or with ``file`` a file) cannot be written; None when it can."""
    from pathlib import Path

    from streaming.checkpoint import directory_problem

    if file:
        if Path(path).is_dir():
            return f"{flag} {path}: is a directory, give a file path"
        return directory_problem(Path(path).parent, flag)
    return directory_problem(path, flag)
