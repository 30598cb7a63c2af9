"""What the driver's JVM and its Python processes print, copied to our stderr without the
tracebacks pyspark's own processes print when a query or the application stops."""

from __future__ import annotations

import os
import re
import sys


class ShutdownNoise:
    """Drops, from what the JVM and its Python processes print, the tracebacks pyspark's own
    Python processes print when the JVM closes their socket as a query or the application stops
    (the streaming source runner, a daemon worker): a chain of tracebacks (``During handling of
    the above exception …``) each ending in ``BrokenPipeError``, ``ConnectionResetError`` or
    ``EOFError`` raised in pyspark's runner or daemon code.  Everything else passes unchanged and
    in order; any other traceback passes whole, as soon as it ends."""

    NOISY_CODE = ("pyspark/sql/streaming/python_streaming_source_runner.py", "pyspark/daemon.py",
                  "pyspark/serializers.py", "pyspark/worker_util.py", "/socket.py")
    NOISY_ERRORS = ("BrokenPipeError", "ConnectionResetError", "EOFError")
    CHAINS = ("During handling of the above exception", "The above exception was the direct cause")
    TRACEBACK = "Traceback (most recent call last):"
    MAX_LINES = 200

    def __init__(self) -> None:
        self._held: list[str] = []
        self._start = 0  # where the traceback being read starts in _held
        self._in_traceback = False

    def feed(self, line: str) -> list[str]:
        """The lines to print now, given the next line."""
        if not self._held:
            if line.startswith(self.TRACEBACK):
                self._held, self._start, self._in_traceback = [line], 0, True
                return []
            return [line]
        if self._in_traceback:
            self._held.append(line)
            if line[:1] in (" ", "\t") and len(self._held) < self.MAX_LINES:
                return []  # a frame of the traceback
            self._in_traceback = False
            frames = [h for h in self._held[self._start:-1] if h.lstrip().startswith("File ")]
            if line.startswith(self.NOISY_ERRORS) and frames and all(any(c in f for c in self.NOISY_CODE) for f in frames):
                return []  # noise so far: held until the chain ends
            return self._flush()
        if not line.strip() or line.startswith(self.CHAINS):
            self._held.append(line)
            return []
        if line.startswith(self.TRACEBACK):
            self._held.append(line)
            self._start, self._in_traceback = len(self._held) - 1, True
            return []
        self._held = []  # a chain of noise ended
        return self.feed(line)

    def _flush(self) -> list[str]:
        held, self._held, self._in_traceback = self._held, [], False
        return held

    def close(self) -> list[str]:
        """At the end of the stream: an unfinished traceback is printed, finished noise is not."""
        return self._flush() if self._in_traceback else []


class LogFile:
    """A text log that rotates: past ``max_bytes`` the file becomes ``NAME.1`` (``.1`` becomes
    ``.2`` ... up to ``backups``) and a new one starts.  Lines from several threads (the JVM's
    stderr pump, the failing query) are written whole."""

    def __init__(self, path, max_bytes: int = 10 << 20, backups: int = 3) -> None:
        import threading
        from pathlib import Path

        self.path, self.max_bytes, self.backups = Path(path), max_bytes, backups
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = None
        self.lost = 0  # writes that failed (a full or vanished disk)

    def write(self, text: str) -> None:
        with self._lock:
            try:
                if self._file is None:
                    self._file = open(self.path, "a", encoding="utf-8")
                if self._file.tell() + len(text) > self.max_bytes and self._file.tell():
                    self._rotate()
                self._file.write(text)
                self._file.flush()
            except OSError:  # the disk is full or gone: the log is the one thing that may be lost
                self.lost += 1

    def _rotate(self) -> None:
        import os

        self._file.close()
        for n in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._file = open(self.path, "a", encoding="utf-8")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


# What the driver's JVM prints every time it starts (Spark's and the JDK's notices, and warnings
# about this machine a local run can do nothing about): not shown on a terminal with no log (the
# API's ``replemu.spark_session``), as the CLI, which writes them to its log, does not show them.
STARTUP_NOISE = re.compile(
    r"^(?:WARNING: Using incubator modules: |Using Spark's default log4j profile: |Setting default log level to |"
    r"To adjust logging level use sc\.setLogLevel\(|.*WARN NativeCodeLoader: Unable to load native-hadoop library|"
    r".*WARN Utils: Your hostname, .* resolves to a loopback address|.*WARN Utils: Set SPARK_LOCAL_IP if you need)")


class _Route:
    """Where the JVM's output goes: the terminal (stderr), or a ``LogFile`` and, with ``echo``, the
    terminal too.  Lines printed before a log is set are held and written to it when it is."""

    def __init__(self) -> None:
        self.log: LogFile | None = None
        self.echo = True
        self.held: list[str] | None = None  # hold_until_log(): lines waiting for the log

    def write(self, line: str) -> None:
        if self.log is not None:
            self.log.write(line)
        elif self.held is not None:
            self.held.append(line)
        if self.echo or (self.log is None and self.held is None):
            if self.log is None and self.held is None and STARTUP_NOISE.match(line) and not os.environ.get("REPLEMU_DEBUG"):
                return
            out = sys.__stderr__
            out.write(line)
            out.flush()


ROUTE = _Route()


def log_to(log: LogFile | None, echo: bool = False) -> None:
    """Send the JVM's output (and what its Python workers print) to ``log``; ``echo``: to the
    terminal as well (``REPLEMU_DEBUG=1``).  ``None``: back to the terminal."""
    held = ROUTE.held or []
    ROUTE.log, ROUTE.echo, ROUTE.held = log, echo or log is None, None
    for line in held:
        if log is not None:
            log.write(line)
        elif not echo:  # no log after all: what was held goes where it would have gone
            sys.__stderr__.write(line)


def hold_until_log(echo: bool = False) -> None:
    """Keep the JVM's output from the terminal until ``log_to`` names the log (the job knows its
    log only once its session runs and its output is claimed)."""
    ROUTE.held, ROUTE.echo = [], echo


def pump_jvm_stderr(stream) -> None:
    """Copy the JVM's stderr (its own and its Python processes') to ``ROUTE``, less ``ShutdownNoise``."""
    noise = ShutdownNoise()
    try:
        for raw in iter(stream.readline, b""):
            for line in noise.feed(raw.decode("utf-8", "replace")):
                ROUTE.write(line)
        for line in noise.close():
            ROUTE.write(line)
    except (OSError, ValueError):  # our stderr is gone: nothing left to tell
        pass
