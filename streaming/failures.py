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

import os
import re
import traceback
from dataclasses import dataclass

from .storage import join


@dataclass(frozen=True)
class Cause:
    """A root cause known by the text it leaves (``pattern``), in one ``kind``."""

    kind: str  # disk_full | output_gone | worker | checkpoint | connection | memory | permission | python | other
    pattern: re.Pattern
    label: str | None = None  # the cause as told (``\\1``: the pattern's groups); None: the matched text
    place: str | None = None  # where it happened, when the cause itself says so (else PLACES, from the frames)


_CHECKPOINT = ("Incomplete log file|Log file was malformed|Unsupported format version|"
               "Error reading (?:delta|snapshot|streaming state) file[^\n]*|ChecksumException[^\n]*|"
               "Checksum error[^\n]*|CANNOT_LOAD_STATE_STORE[^\n]*|CANNOT_READ_(?:DELTA|SNAPSHOT)_FILE[^\n]*|"
               "STATE_STORE_[A-Z_]*(?:CORRUPT|MISSING|NOT_FOUND)[A-Z_]*[^\n]*|"
               "MismatchedInputException[^\n]*|JsonParseException[^\n]*|"
               "Failed to read (?:metadata|commit|offset)[^\n]*")

# Most specific first: the first entry whose pattern occurs anywhere in the failure's text wins
# (so a deep cause that Spark wraps in a generic one, e.g. CANNOT_LOAD_STATE_STORE around a torn
# file, has its own entry before the generic one).
CAUSES: tuple[Cause, ...] = (
    Cause("disk_full", re.compile(r"No space left on device|Disk quota exceeded")),
    Cause("output_gone", re.compile(r"the output directory vanished while the stream ran"), place="the output"),  # streaming.sink
    Cause("worker", re.compile(r"Python worker exited unexpectedly \(crashed\)|PYTHON_WORKER_EXITED_UNEXPECTEDLY|"
                               r"Python worker (?:died|crashed)[^\n]*")),
    # a checksum file left behind by a hand-removed offsets/N or commits/N: Spark's rename of the new N fails on it
    Cause("checkpoint", re.compile(r"FileAlreadyExistsException: Rename destination (\S*/(?:offsets|commits)/\.\d+\.crc) already exists"),
          r"a checksum file left behind without its file (\1)"),
    Cause("checkpoint", re.compile(r"ChecksumException: Checksum error: "), "Checksum error (a torn or altered file)"),
    Cause("checkpoint", re.compile(r"EOFException: Stream ended prematurely"), "Stream ended prematurely (a torn file)"),
    Cause("checkpoint", re.compile(r"JsonEOFException: (Unexpected end-of-input[^\n]*)"), r"\1 (a torn JSON file)"),
    Cause("checkpoint", re.compile(r"MismatchedInputException: (No content to map due to end-of-input)"),
          r"\1 (an empty JSON file)"),
    Cause("checkpoint", re.compile(_CHECKPOINT)),
    Cause("memory", re.compile(r"Java heap space|GC overhead limit exceeded|OutOfMemoryError[^\n]*|MemoryError")),
    # gRPC's words when a Spark Connect server is gone: before the bare "UNAVAILABLE" of the status line
    Cause("connection", re.compile(r"failed to connect to all addresses; last error: [^\n\"]*?(?:ipv[46]:)?(\S+?:\d+): "
                                   r"(?:Failed to connect to remote host: )?([^\n\"]*)"),
          r"the Spark Connect server \1 does not answer (\2)"),
    Cause("connection", re.compile(r"Cannot call methods on a stopped SparkContext"),  # a Connect server shutting down
          "the Spark server stopped (Cannot call methods on a stopped SparkContext)"),
    Cause("connection", re.compile(r"Connection refused|Connection reset by peer|UNAVAILABLE[^\n]*|"
                                   r"failed to connect to all addresses[^\n]*")),
    Cause("permission", re.compile(r"Permission denied|AccessDeniedException[^\n]*|Read-only file system")),
)


@dataclass(frozen=True)
class Place:
    """Where a cause happened, told by the first frame below it that ``pattern`` matches (JVM
    classes, or the Python files of this package); ``file``: the one file it names, relative to
    the checkpoint, when the text itself names none."""

    pattern: re.Pattern
    told: str
    file: str | None = None


PLACES: tuple[Place, ...] = (
    Place(re.compile(r"HDFSBackedStateStoreProvider|RocksDBStateStoreProvider|RocksDBFileManager|\bRocksDB\b|StateStore"),
          "the state store in the checkpoint"),
    Place(re.compile(r"\bStreamMetadata\b"), "the checkpoint's metadata", "metadata"),
    Place(re.compile(r"\bCommitLog\b"), "the checkpoint's commits"),
    Place(re.compile(r"\bOffsetSeqLog\b"), "the checkpoint's offsets"),
    Place(re.compile(r"HDFSMetadataLog|CheckpointFileManager|CompactibleFileStreamLog"), "the checkpoint's logs"),
    Place(re.compile(r"expectations/suites\.py"), "the GX results and Data Docs in the output"),
    Place(re.compile(r"streaming/(?:sink|storage|progress|job)\.py"), "the output"),
)
_PATH = re.compile(r"((?:file:|hdfs://|s3a?://|gs://|abfss?://|wasbs?://)[^\s,;'\"]+|/[^\s,;:'\"]+/[^\s,;:'\"]+)")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the clone: the folder above streaming/
_PY_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_PY_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Exit|Interrupt)): (.+)$", re.M)
_SPARK_CODE = re.compile(r"/(?:pyspark|py4j|grpc)/")
_OWN_CODE = re.compile(r"/(?:emulator|streaming|expectations|replemu|scenario_io)/[\w/]+\.py$")
# The last folder of a path that is one of our packages: greedy, so a clone (or any folder above it)
# named like a package (``/home/me/replemu/streaming/x.py``) keeps its package, not the clone's name.
_OWN_TAIL = re.compile(r"^.*/((?:emulator|streaming|expectations|replemu|scenario_io)/[\w/]+\.py)$")


def own_path(path: str) -> str | None:
    """``path`` of one of this project's source files as the repository names it
    (``streaming/processor.py``), whatever the folders above the clone are called; None for a file
    that is not ours (pyspark's ``sql/streaming/`` modules included)."""
    if not _OWN_CODE.search(path):
        return None
    root = _ROOT + "/"
    if path.startswith(root):  # this clone's, whatever the folders above it are called
        return path[len(root):]
    if _SPARK_CODE.search(path):
        return None
    tail = _OWN_TAIL.match(path)  # a copy elsewhere (an executor's): its last package folder
    return tail.group(1) if tail else None


@dataclass(frozen=True)
class Failure:
    kind: str
    cause: str  # one line
    place: str | None  # "the state store in the checkpoint", "the output", ...
    path: str | None  # the file named next to the cause, when the text names one
    file: str | None = None  # else the one file the place names, relative to the checkpoint ("metadata")

    def lines(self, protocol: str, checkpoint: str, output: str, log: str | None) -> list[str]:
        """What the terminal gets: what stopped and why, then what to do."""
        verb = {"disk_full": "writing", "permission": "writing", "output_gone": "writing", "checkpoint": "reading"}.get(self.kind, "in")
        where = f", {verb} {self.place}" if self.place else ""
        path = self.path or (self.file and join(checkpoint, self.file))
        named = f" ({path})" if path else ""
        first = f"replemu: the stream stopped (protocol {protocol}): {self.cause}{where}{named}"
        details = f"; every trace is in {log}" if log else ""
        if self.kind == "output_gone" and log and log.startswith(output.rstrip("/") + "/"):
            details = f"; the log {log} went with it (REPLEMU_DEBUG=1 prints every trace)"
        kept = f"the checkpoint {checkpoint} keeps every committed micro-batch"
        if self.kind == "disk_full":
            target = checkpoint if self.place and "checkpoint" in self.place else output if self.place else f"{checkpoint} or {output}"
            action = f"free space on the disk that holds {target} (or move the run to a larger one) and restart the same command; {kept}"
        elif self.kind == "output_gone":
            action = (f"the outputs of the micro-batches that the checkpoint {checkpoint} holds as done went with it, and "
                      f"Spark does not run a committed micro-batch again: restore {output} from a copy and restart the same "
                      f"command, or start over: move {checkpoint} away and run the same command (every micro-batch runs again)")
        elif self.kind == "worker":
            action = (f"a Spark Python worker died (killed, or out of memory: see `dmesg`); restart the same command: {kept}")
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
        place = _place(text, text.rfind(exc.strerror))
        return Failure(kind, exc.strerror, place and place.told, exc.filename and str(exc.filename))
    for cause in CAUSES:
        m = cause.pattern.search(text)
        if m:
            label = m.expand(cause.label) if cause.label else m.group(0).strip().rstrip(".")
            place = Place(re.compile(""), cause.place) if cause.place else _place(text, m.start())
            return Failure(cause.kind, label[:200], place and place.told, _path_near(text, m), place and place.file)
    python = _python_error(text)
    if python is not None:
        return python
    return Failure("other", _innermost(text)[:300], None, None)


def _place(text: str, at: int) -> Place | None:
    """The first ``PLACES`` entry among the 120 lines of stack after ``at``."""
    below = "\n".join(text[max(at, 0):].splitlines()[:120])
    hits = [(m.start(), i) for i, place in enumerate(PLACES) for m in [place.pattern.search(below)] if m]
    return PLACES[min(hits)[1]] if hits else None


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
    ours = [m for m in _PY_FRAME.finditer(text) if own_path(m.group(1)) is not None]
    if not ours:
        return None
    frame = ours[-1]
    errors = [e for e in _PY_ERROR.finditer(text, frame.end())]
    if not errors:
        return None
    error = errors[0]
    if any(_SPARK_CODE.search(m.group(1)) for m in _PY_FRAME.finditer(text, frame.end(), error.start())):
        return None  # raised by pyspark below our call (a query that failed in the JVM): not a Python error of ours
    where = own_path(frame.group(1))
    return Failure("python", f"{error.group(1)}: {error.group(2).strip()[:200]}", None, f"{where}:{frame.group(2)} in {frame.group(3)}")


def _innermost(text: str) -> str:
    """The last ``Caused by:`` line, else the first exception line (``Name: message``), else the
    first line of the text that is not part of a Python traceback."""
    caused = re.findall(r"^Caused by: (.+)$", text, re.M)
    if caused:
        return caused[-1].strip()
    error = _PY_ERROR.search(text)
    if error:
        return f"{error.group(1)}: {error.group(2).strip()}"
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith(("Traceback", " ", "\t"))), "")
    return first.strip()
