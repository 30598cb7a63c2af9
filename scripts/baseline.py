"""What the ``--baseline REF`` benchmarks share: this repository's HEAD, and a commit extracted
with ``git archive`` to run beside it (the same virtual environment, runs alternated).

Imported by ``bench_core.py``, ``bench_explore.py``, ``bench_campaign.py`` and ``same_outputs.py``
(run as scripts, so this folder is on ``sys.path``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASELINE = "736e956"  # the commit before the speed work of issue 22


def git(*argv: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *argv], check=True, capture_output=True, text=True).stdout.strip()


def project_head() -> str:
    """HEAD of the working tree, with "(dirty)" when it has uncommitted changes (read without
    touching the index: --no-optional-locks)."""
    dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), "status", "--porcelain"], check=True,
                           capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "HEAD") + (" (dirty)" if dirty else "")


def extract(commit: str, into: Path | None = None, who: str = "bench", byte_compile: bool = True) -> Path:
    """``git archive COMMIT | tar -x`` into ``into`` (a new temporary directory when None),
    byte-compiled (unless ``byte_compile`` is false), so neither side's timed run compiles the
    sources (the project's are compiled by its first run)."""
    if into is None:
        into = Path(tempfile.mkdtemp(prefix="replemu-bench-ref-"))
    else:
        into.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout)
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait() or untar.returncode:
        shutil.rmtree(into, ignore_errors=True)
        raise SystemExit(f"{who}: could not extract {commit}")
    if byte_compile:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(into)], check=False, capture_output=True)
    return into
