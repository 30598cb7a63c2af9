"""What the driver's JVM and its Python processes print, copied to our stderr without the
tracebacks pyspark's own processes print when a query or the application stops."""

from __future__ import annotations

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


def pump_jvm_stderr(stream) -> None:
    """Copy the JVM's stderr (its own and its Python processes') to ours, less ``ShutdownNoise``."""
    noise = ShutdownNoise()
    out = sys.__stderr__
    try:
        for raw in iter(stream.readline, b""):
            for line in noise.feed(raw.decode("utf-8", "replace")):
                out.write(line)
            out.flush()
        for line in noise.close():
            out.write(line)
        out.flush()
    except (OSError, ValueError):  # our stderr is gone: nothing left to tell
        pass
