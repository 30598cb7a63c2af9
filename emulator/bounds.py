"""Kafka's numeric types, and how a value is quoted in an error message.

Leader epochs are int32 in Kafka, offsets and times int64: a scenario may not name more.
``short_repr`` quotes at most a short prefix of a value, so an error about a huge (or
maliciously nested) value stays short and cheap to format.
"""

from __future__ import annotations

from typing import Any

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
QUOTE_LIMIT = 80
# Replicas of one partition: Kafka's replication factors are single digits; the emulator's steps
# cost grows with the square of the replicas, so a file may not ask for thousands.
MAX_REPLICAS = 64
# Steps between two calls of a replay's ``progress`` (run_scenario, run_quorum_scenario): a long
# scenario's replay says how far it is, a short one says nothing.
PROGRESS_EVERY = 100_000


def short_repr(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` cut to ``limit`` characters; containers are summarised, never expanded."""
    if isinstance(value, (dict, list, tuple, set)):
        kind = type(value).__name__
        return f"<a {kind} of {len(value)} items>" if len(value) > 8 else _cut(_small_repr(value, 2), limit)
    return _cut(repr(value), limit)


def short_list(items: list[str], limit: int = 10) -> str:
    """The first ``limit`` items, comma-separated, and how many more there are."""
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _small_repr(value: Any, depth: int) -> str:
    if isinstance(value, dict):
        if depth == 0:
            return "{...}"
        return "{" + ", ".join(f"{_small_repr(k, depth - 1)}: {_small_repr(v, depth - 1)}" for k, v in list(value.items())[:8]) + "}"
    if isinstance(value, (list, tuple)):
        if depth == 0:
            return "[...]"
        return "[" + ", ".join(_small_repr(v, depth - 1) for v in list(value)[:8]) + "]"
    return _cut(repr(value), QUOTE_LIMIT)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
