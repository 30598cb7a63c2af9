"""A failed query told in one line: the deepest cause, what was being written or read, and the
action that will work.

A query failure reaches Python as a chain: a ``StreamingQueryException`` whose JVM stack trace
holds every ``Caused by``, and, when the foreachBatch sink or the state function raised in
Python, a Python traceback printed inside a JVM message inside another Python exception.  The
cause a person can act on ("No space left on device", "Incomplete log file") sits at the bottom,
hundreds of lines down.  ``explain`` reads the whole text of the chain (``failure_text``), finds
the first ``CAUSES`` entry that matches it, and the first ``PLACES`` entry in the stack frames
below that cause; ``Failure.lines`` are the two lines the terminal gets.  The whole text goes to
the job's log file (``streaming.jvm_output``), never to the terminal.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass


@dataclass(frozen=True)
class Cause:
    """A root cause known by the text it leaves (``pattern``), in one ``kind``."""

    kind: str  # disk_full | checkpoint | connection | memory | permission | python | other
    pattern: re.Pattern
    label: str | None = None  # the cause as told; None: the matched text


# Most specific first: the first entry whose pattern occurs anywhere in the failure's text wins.
CAUSES: tuple[Cause, ...] = (
    Cause("disk_full", re.compile(r"No space left on device|Disk quota exceeded")),
    Cause("checkpoint", re.compile(r"Incomplete log file|Log file was malformed|Unsupported format version|"
                                   r"Error reading (?:delta|snapshot|streaming state) file[^\n]*|ChecksumException[^\n]*|"
                                   r"Checksum error[^\n]*|CANNOT_LOAD_STATE_STORE[^\n]*|CANNOT_READ_(?:DELTA|SNAPSHOT)_FILE[^\n]*|"
                                   r"STATE_STORE_[A-Z_]*(?:CORRUPT|MISSING|NOT_FOUND)[A-Z_]*[^\n]*|"
                                   r"MismatchedInputException[^\n]*|JsonParseException[^\n]*|"
                                   r"Failed to read (?:metadata|commit|offset)[^\n]*")),
    Cause("memory", re.compile(r"Java heap space|GC overhead limit exceeded|OutOfMemoryError[^\n]*|MemoryError")),
    Cause("connection", re.compile(r"Connection refused|Connection reset by peer|UNAVAILABLE[^\n]*|"
                                   r"failed to connect to all addresses[^\n]*")),
    Cause("permission", re.compile(r"Permission denied|AccessDeniedException[^\n]*|Read-only file system")),
)

# Where the cause happened, told by the first of these frames below it (JVM classes, or the
# Python files of this package).
PLACES: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"HDFSBackedStateStoreProvider|RocksDBStateStoreProvider|RocksDBFileManager|\bRocksDB\b|StateStore"),
     "the state store in the checkpoint"),
    (re.compile(r"HDFSMetadataLog|OffsetSeqLog|CommitLog|CheckpointFileManager|CompactibleFileStreamLog|StreamMetadata"),
     "the checkpoint's logs"),
    (re.compile(r"expectations/suites\.py"), "the GX results and Data Docs in the output"),
    (re.compile(r"streaming/(?:sink|storage|progress|job)\.py"), "the output"),
)
_PATH = re.compile(r"((?:file:|hdfs://|s3a?://|gs://|abfss?://|wasbs?://)[^\s,;'\"]+|/[^\s,;:'\"]+/[^\s,;:'\"]+)")
_PY_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_PY_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Exit|Interrupt)): (.+)$", re.M)
_OWN_CODE = re.compile(r"/(?:emulator|streaming|expectations|replemu|scenario_io)/[\w/]+\.py$")


@dataclass(frozen=True)
class Failure:
    kind: str
    cause: str  # one line
    place: str | None  # "the state store in the checkpoint", "the output", ...
    path: str | None  # the file named next to the cause, when the text names one

    def lines(self, protocol: str, checkpoint: str, output: str, log: str | None) -> list[str]:
        """What the terminal gets: what stopped and why, then what to do."""
        verb = {"disk_full": "writing", "permission": "writing", "checkpoint": "reading"}.get(self.kind, "in")
        where = f", {verb} {self.place}" if self.place else ""
        named = f" ({self.path})" if self.path else ""
        first = f"replemu: the stream stopped (protocol {protocol}): {self.cause}{where}{named}"
        details = f"; every trace is in {log}" if log else ""
        kept = f"the checkpoint {checkpoint} keeps every committed micro-batch"
        if self.kind == "disk_full":
            target = checkpoint if self.place and "checkpoint" in self.place else output if self.place else f"{checkpoint} or {output}"
            action = f"free space on the disk that holds {target} (or move the run to a larger one) and restart the same command; {kept}"
        elif self.kind == "checkpoint":
            action = (f"the checkpoint is damaged: `replemu checkpoint check {checkpoint}` names every broken file, "
                      f"`replemu checkpoint repair {checkpoint}` rolls it back to the last whole micro-batch; then restart the same command")
        elif self.kind == "memory":
            action = ("give Spark more memory (spark.driver.memory, spark.executor.memory in conf/spark.conf) or smaller "
                      f"micro-batches (--max-files-per-trigger, --steps-per-batch) and restart the same command; {kept}")
        elif self.kind == "connection":
            action = f"start the Spark process it lost (a Spark Connect server: check --remote) and restart the same command; {kept}"
        elif self.kind == "permission":
            action = f"make {self.path or f'{checkpoint} and {output}'} writable by this user and restart the same command; {kept}"
        elif self.kind == "python":
            action = f"this is a bug in replemu: please report it with the log; {kept}"
        else:
            action = f"fix the cause and restart the same command to continue; {kept}"
        return [first, f"replemu: {action}{details}"]


def failure_text(exc: BaseException) -> str:
    """Everything known about ``exc``: its Python traceback with its causes, and the JVM's stack
    trace with every ``Caused by`` (classic sessions; a Connect error carries the server's text)."""
    parts = ["".join(traceback.format_exception(exc))]
    for attr in ("_desc", "_stackTrace", "_stacktrace"):
        value = getattr(exc, attr, None)
        if isinstance(value, str) and value and value not in parts[0]:
            parts.append(value)
    return "\n".join(parts)


def explain(exc: BaseException | str) -> Failure:
    """The deepest cause of ``exc`` (an exception, or its ``failure_text``) as a ``Failure``."""
    text = exc if isinstance(exc, str) else failure_text(exc)
    if isinstance(exc, OSError) and exc.strerror:  # raised here, not in Spark: its own words and file
        kind = next((c.kind for c in CAUSES if c.pattern.search(exc.strerror)), "other")
        return Failure(kind, exc.strerror, _place(text, text.rfind(exc.strerror)), exc.filename and str(exc.filename))
    for cause in CAUSES:
        m = cause.pattern.search(text)
        if m:
            label = cause.label or m.group(0).strip().rstrip(".")
            return Failure(cause.kind, label[:200], _place(text, m.start()), _path_near(text, m))
    python = _python_error(text)
    if python is not None:
        return python
    return Failure("other", _innermost(text)[:300], None, None)


def _place(text: str, at: int) -> str | None:
    """The first ``PLACES`` entry among the 120 lines of stack after ``at``."""
    below = "\n".join(text[max(at, 0):].splitlines()[:120])
    hits = [(m.start(), place) for pattern, place in PLACES for m in [pattern.search(below)] if m]
    return min(hits)[1] if hits else None


def _path_near(text: str, m: re.Match) -> str | None:
    """A path on the line of the cause (e.g. ``Failed to read log file file:/…/offsets/19.``)."""
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    line = text[start:end if end >= 0 else len(text)]
    found = _PATH.search(line)
    if not found:
        return None
    path = found.group(1).rstrip(".")
    return path[len("file:"):] if path.startswith("file:/") else path


def _python_error(text: str) -> Failure | None:
    """A Python exception raised in this package's code (the state function, the sink): its last
    line and the deepest frame of ours, as ``file:line``."""
    ours = [m for m in _PY_FRAME.finditer(text) if _OWN_CODE.search(m.group(1))]
    if not ours:
        return None
    frame = ours[-1]
    errors = [e for e in _PY_ERROR.finditer(text, frame.end())]
    if not errors:
        return None
    error = errors[0]
    where = re.sub(r"^.*?/((?:emulator|streaming|expectations|replemu|scenario_io)/)", r"\1", frame.group(1))
    return Failure("python", f"{error.group(1)}: {error.group(2).strip()[:200]}", None, f"{where}:{frame.group(2)} in {frame.group(3)}")


def _innermost(text: str) -> str:
    """The last ``Caused by:`` line, else the first line of the text."""
    caused = re.findall(r"^Caused by: (.+)$", text, re.M)
    if caused:
        return caused[-1].strip()
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith("Traceback")), "")
    return first.strip()
