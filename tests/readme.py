"""The README's commands, read from its fenced blocks (tests/test_readme.py runs them; a block
marked ``<!-- run by tests/FILE.py::TEST -->`` is run by that test instead, e.g. the streaming
tour by a Spark test that shares the suite's SparkSession).

Blocks:

* ``console``: lines starting with ``$ `` are commands, the lines after one (up to the next
  ``$ ``) the output the README shows; a line ``...`` stands for any number of lines left out.
* ``bash``, ``sh``, ``shell``: one command a line (``#`` comments dropped); only the two commands
  that are the main job and CI themselves (``EXEMPT``) may stand there unrun.
* ``pycon``: a doctest (a ``python`` block is refused: it would show no output to check).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# The main job and CI themselves: they run everything else, so nothing runs them here.
EXEMPT = ("bash scripts/main.sh", "bash scripts/test.sh")
ELISION = "..."
COMMAND_LANGS = {"console", "bash", "sh", "shell", "pycon", "python"}
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!-- run by (tests/[\w./-]+\.py)::(\w+) -->$")


@dataclass
class Command:
    line: int  # where it stands in the README (1-based)
    text: str
    shown: list[str] = field(default_factory=list)  # the output the README shows


@dataclass
class Block:
    line: int  # the opening fence's line (1-based)
    lang: str
    body: list[str]
    run_by: tuple[str, str] | None  # (test file, test function) named by a marker above the fence

    @property
    def commands(self) -> list[Command]:
        if self.lang == "console":
            found: list[Command] = []
            for i, text in enumerate(self.body):
                if text.startswith("$ "):
                    found.append(Command(self.line + 1 + i, text[2:].strip()))
                elif found:
                    found[-1].shown.append(text.rstrip())
                elif text.strip():
                    raise ValueError(f"README.md:{self.line + 1 + i}: output before the first `$ ` command")
            return found
        if self.lang in ("bash", "sh", "shell"):
            return [Command(self.line + 1 + i, text.split(" #")[0].strip()) for i, text in enumerate(self.body)
                    if text.strip() and not text.lstrip().startswith("#")]
        return []


def blocks(text: str | None = None) -> list[Block]:
    lines = (README.read_text(encoding="utf-8") if text is None else text).splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"README.md:{i + 1}: a fenced block is never closed")
        above = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(above)
        found.append(Block(i + 1, opening.group(1), lines[i + 1:end], marker.groups() if marker else None))
        i = end + 1
    return found


def blocks_run_by(test: str) -> list[Block]:
    """The README's blocks whose marker names ``test`` (``tests/FILE.py::TEST``): that test runs them."""
    path, name = test.split("::")
    chosen = [b for b in blocks() if b.run_by == (path, name)]
    assert chosen, f"README.md has no block marked <!-- run by {test} -->"
    return chosen


def mismatch(shown: list[str], printed: str) -> str | None:
    """Why ``printed`` is not what the README shows (None: it is). The shown lines must appear in
    order, each run of consecutive shown lines as consecutive printed lines; ``...`` stands for any
    number of lines (none included), and without one at either end the output starts or ends there."""
    actual = [line.rstrip() for line in printed.splitlines()]
    while actual and not actual[-1]:
        actual.pop()  # a blank last line shows as nothing
    if not shown:
        return None if not actual else "the README shows no output, the command printed:\n" + "\n".join(actual)
    segments: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == ELISION:
            segments.append([])
        else:
            segments[-1].append(line)
    open_start, open_end = not segments[0], not segments[-1]
    segments = [s for s in segments if s]
    pos = 0
    for k, seg in enumerate(segments):
        last = k == len(segments) - 1
        if k == 0 and not open_start:
            candidates = [0]
        elif last and not open_end:
            candidates = [len(actual) - len(seg)]
        else:
            candidates = range(pos, len(actual) - len(seg) + 1)
        at = next((c for c in candidates if c >= pos and actual[c:c + len(seg)] == seg), None)
        if at is None:
            return f"these lines are not printed{' in that order' if k else ''}:\n" + "\n".join(seg) + \
                   "\n--- the command printed:\n" + "\n".join(actual)
        pos = at + len(seg)
    return None


def repo_view(where: Path) -> Path:
    """A directory that looks like the repository's root (every top-level entry a symbolic link to
    the real one) but keeps what commands write (``out/``) to itself."""
    where.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in ("out", ".git", ".venv") and not (where / entry.name).exists():
            (where / entry.name).symlink_to(entry)
    return where
