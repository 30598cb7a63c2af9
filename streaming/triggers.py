"""The trigger grammar of ``replemu stream --trigger``: one parser, used before Spark starts."""

from __future__ import annotations

import re
from dataclasses import dataclass

TRIGGER_HELP = "available-now (default) | once | processing-time=5s (ms, s, m, h)"
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}
_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
MAX_INTERVAL_MS = 7 * 24 * 3_600_000  # a week


class TriggerError(ValueError):
    pass


@dataclass(frozen=True)
class Trigger:
    kind: str  # "available-now" | "once" | "processing-time"
    interval: str | None = None  # Spark's form, e.g. "5 seconds"

    @property
    def drains(self) -> bool:
        """True when the query ends once the input is drained (no processing-time timeouts)."""
        return self.kind != "processing-time"

    def apply(self, writer):
        if self.kind == "available-now":
            return writer.trigger(availableNow=True)
        if self.kind == "once":
            return writer.trigger(once=True)
        return writer.trigger(processingTime=self.interval)


def parse_trigger(text: str) -> Trigger:
    """``available-now`` | ``once`` | ``processing-time=<n><ms|s|m|h>`` (n >= 1)."""
    if text in ("available-now", "once"):
        return Trigger(text)
    if text.startswith("processing-time="):
        m = re.fullmatch(r"\s*(\d{1,12})\s*(ms|s|m|h)\s*", text.split("=", 1)[1])
        if m and 1 <= int(m.group(1)) * _MS[m.group(2)] <= MAX_INTERVAL_MS:
            return Trigger("processing-time", f"{int(m.group(1))} {_UNITS[m.group(2)]}")
    raise TriggerError(f"unknown trigger {text[:80]!r} ({TRIGGER_HELP}; an interval from 1 ms to a week)")
