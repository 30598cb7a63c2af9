"""What a checkpoint is, and who is using it: the run's identity and a lock.

A Spark checkpoint remembers offsets and state but not what produced them: restarted with
another ``--protocol`` it would go on stepping old partitions under the old variant and new ones
under the new, and with another ``--input`` Spark fails deep inside with ``Wrong basePath``.  So
on its first start the job writes its identity (``IDENTITY_FIELDS``) into the checkpoint as
``replemu-identity.json``; a restart whose identity differs is refused, naming every difference,
unless each one is allowed explicitly (``--allow-change FIELD``; the identity then records the
change in its ``history``).  What only steers how the run proceeds — trigger, files per trigger,
``--max-steps``, the master — is not identity: a run may be continued further, or on another
machine.

Two jobs on one checkpoint (or one output directory) would interleave their commits.  The job
holds an exclusive ``flock`` on ``replemu.lock`` in both directories for its whole life; the
kernel drops it when the process dies, even under ``kill -9``, so a killed job's lock is found
stale (the file still names its pid) and taken over.  ``flock`` is a local-filesystem lock: two
hosts sharing a network filesystem are not kept apart by it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .schemas import STATE_SCHEMA_VERSION

IDENTITY_FILE = "replemu-identity.json"
LOCK_FILE = "replemu.lock"
IDENTITY_FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint (or output directory) that this run must not use; the message says why."""


@dataclass(frozen=True)
class IdentityField:
    name: str
    doc: str
    changeable: bool = True  # may a restart change it with --allow-change NAME


IDENTITY_FIELDS: tuple[IdentityField, ...] = (
    IdentityField("protocol", "the variant, or all (one query per variant)"),
    IdentityField("knobs", "the --knob settings over the variant's preset"),
    IdentityField("input", "the event directory (absolute), or null for a workload"),
    IdentityField("workload", "the generated workload: profile, its digest, seed, partitions, steps per batch"),
    IdentityField("shuffle_partitions", "the number of state partitions (spark.sql.shuffle.partitions), chosen when the "
                                        "checkpoint was created; Spark fixes it in the checkpoint", changeable=False),
    IdentityField("state_store", "the state store provider (Spark keeps the first one)"),
    IdentityField("compact_min_records", "records beyond the last compaction that trigger one"),
    IdentityField("gap_timeout_ms", "how long a partition waits for a missing sequence number"),
    IdentityField("state_schema_version", "the layout of a partition's state row", changeable=False),
)
IDENTITY_NAMES = tuple(f.name for f in IDENTITY_FIELDS)
_CHANGEABLE = {f.name: f.changeable for f in IDENTITY_FIELDS}
CHANGEABLE_IDENTITY = tuple(f.name for f in IDENTITY_FIELDS if f.changeable)


def run_identity(*, protocol: str, knobs: dict[str, Any] | None, input_dir: str | Path | None, workload: dict | None,
                 shuffle_partitions: int | str | None, state_store: str | None, compact_min_records: int | None,
                 gap_timeout_ms: int | None) -> dict[str, Any]:
    """The identity of a run, as recorded (every ``IDENTITY_FIELDS`` name, JSON values)."""
    shown_workload = None
    if workload is not None:
        import hashlib

        spec = workload.get("profile_spec")
        shown_workload = {
            "profile": workload.get("profile"), "seed": workload.get("seed"), "partitions": workload.get("partitions"),
            "steps_per_batch": workload.get("steps_per_batch"),
            "profile_digest": "sha256:" + hashlib.sha256(str(spec).encode("utf-8")).hexdigest()[:16] if spec else None,
        }
    return {
        "protocol": protocol,
        "knobs": {k: knobs[k] for k in sorted(knobs or {})},
        "input": str(Path(input_dir).resolve()) if input_dir is not None else None,
        "workload": shown_workload,
        "shuffle_partitions": None if shuffle_partitions is None else int(shuffle_partitions),
        "state_store": state_store or "hdfs",
        "compact_min_records": compact_min_records,
        "gap_timeout_ms": gap_timeout_ms,
        "state_schema_version": STATE_SCHEMA_VERSION,
    }


def identity_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The names of the identity fields whose values differ, in ``IDENTITY_FIELDS`` order."""
    return [name for name in IDENTITY_NAMES if recorded.get(name) != current.get(name)]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def directory_problem(path: str | Path, flag: str) -> str | None:
    """Why ``path`` cannot be (or become) a directory this process writes in; None when it can."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            return f"{flag} {path}: exists and is not a directory"
        return None if os.access(path, os.W_OK | os.X_OK) else f"{flag} {path}: not writable"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{flag} {path}: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{flag} {path}: cannot create it ({parent} is not writable)"
    return None


@dataclass
class Claim:
    """The locks a running job holds (released by ``release`` or by the process's death)."""

    held: list[tuple[Path, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def release(self) -> None:
        for path, fd in reversed(self.held):
            try:
                os.ftruncate(fd, 0)  # an empty lock file: released in order, nobody to take over from
            finally:
                os.close(fd)
        self.held.clear()

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _lock(directory: Path, what: str, claim: Claim) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise CheckpointError(f"{what} {directory} is in use by another running job ({holder or 'holder unknown'}); "
                                  f"stop it first, or use another directory") from None
        raise CheckpointError(f"{what} {directory}: cannot lock {path}: {exc.strerror}") from None
    previous = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    if previous:
        claim.notes.append(f"{what} {directory}: took over the lock of a job that ended without releasing it ({previous})")
    me = f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"
    os.ftruncate(fd, 0)
    os.pwrite(fd, me.encode("utf-8") + b"\n", 0)
    claim.held.append((path, fd))


def _has_batches(output_dir: Path) -> bool:
    return output_dir.is_dir() and any(output_dir.glob("*/batch_id=*"))


def claim_run(checkpoint_dir: str | Path, output_dir: str | Path, identity: dict[str, Any],
              allow_changes: tuple[str, ...] = ()) -> Claim:
    """Lock the checkpoint and the output directory, then check (first start: record) the identity.

    Raises ``CheckpointError`` naming each problem; on error nothing is left locked or written.
    """
    checkpoint_dir, output_dir = Path(checkpoint_dir), Path(output_dir)
    for path, flag in ((checkpoint_dir, "--checkpoint"), (output_dir, "--output")):
        problem = directory_problem(path, flag)
        if problem:
            raise CheckpointError(problem)
    a, b = checkpoint_dir.resolve(), output_dir.resolve()
    if a == b or a in b.parents or b in a.parents:
        raise CheckpointError(f"--checkpoint {checkpoint_dir} and --output {output_dir}: give two separate directories "
                              f"(neither inside the other)")
    unknown = [n for n in allow_changes if n not in IDENTITY_NAMES]
    if unknown:
        raise CheckpointError(f"--allow-change {unknown[0]!r}: not an identity field (fields: {', '.join(IDENTITY_NAMES)})")
    claim = Claim()
    try:
        _lock(checkpoint_dir, "checkpoint", claim)
        _lock(output_dir, "output directory", claim)
        _check_identity(checkpoint_dir, output_dir, identity, allow_changes, claim)
    except BaseException:
        claim.release()
        raise
    return claim


def read_identity(checkpoint_dir: str | Path) -> dict[str, Any] | None:
    path = Path(checkpoint_dir) / IDENTITY_FILE
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable run identity ({exc}); the checkpoint cannot be checked") from None
    if not isinstance(doc, dict) or doc.get("format") != IDENTITY_FORMAT or not isinstance(doc.get("identity"), dict):
        raise CheckpointError(f"{path}: not a replemu run identity (format {IDENTITY_FORMAT})")
    return doc


def _write_identity(checkpoint_dir: Path, doc: dict[str, Any]) -> None:
    path = checkpoint_dir / IDENTITY_FILE
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _check_identity(checkpoint_dir: Path, output_dir: Path, identity: dict[str, Any], allow: tuple[str, ...],
                    claim: Claim) -> None:
    doc = read_identity(checkpoint_dir)
    spark_state = (checkpoint_dir / "offsets").exists() or any(checkpoint_dir.glob("*/offsets"))
    if doc is None:
        if spark_state:
            raise CheckpointError(f"--checkpoint {checkpoint_dir}: holds a stream's offsets but no {IDENTITY_FILE}: "
                                  f"it was not written by this version of replemu, so what it holds cannot be checked")
        if _has_batches(output_dir):
            raise CheckpointError(f"--output {output_dir}: holds micro-batches of an earlier run, but the checkpoint "
                                  f"{checkpoint_dir} is new: the new run would mix its batches with them; give an empty "
                                  f"output directory (or the earlier run's checkpoint)")
        _write_identity(checkpoint_dir, {"format": IDENTITY_FORMAT, "identity": identity, "history": []})
        return
    recorded = doc["identity"]
    differences = identity_differences(recorded, identity)
    refused = [n for n in differences if n not in allow or not _CHANGEABLE[n]]
    if refused:
        lines = [f"  {n}: checkpoint {_short(recorded.get(n))}, this run {_short(identity.get(n))}" for n in refused]
        fixed = [n for n in refused if not _CHANGEABLE[n]]
        hint = (f"a checkpoint's {', '.join(fixed)} cannot change: start a new checkpoint" if fixed else
                "give the checkpoint's values, use a new checkpoint, or allow each difference with "
                + " ".join(f"--allow-change {n}" for n in refused))
        raise CheckpointError(f"--checkpoint {checkpoint_dir} was created by a different run:\n" + "\n".join(lines) + f"\n{hint}")
    if differences:
        doc["history"].append({"identity": recorded, "changed": differences})
        doc["identity"] = identity
        _write_identity(checkpoint_dir, doc)
        claim.notes.append(f"checkpoint {checkpoint_dir}: allowed changes of {', '.join(differences)} recorded in {IDENTITY_FILE}")
