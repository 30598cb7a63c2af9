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
from typing import TYPE_CHECKING, Any

from .operators import DEFAULT_OPERATOR

if TYPE_CHECKING:
    from .workload_source import WorkloadSpec

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
    IdentityField("operator", "Spark's stateful operator (streaming.operators): the layout the state is kept in",
                  changeable=False),
)
IDENTITY_NAMES = tuple(f.name for f in IDENTITY_FIELDS)
_CHANGEABLE = {f.name: f.changeable for f in IDENTITY_FIELDS}
CHANGEABLE_IDENTITY = tuple(f.name for f in IDENTITY_FIELDS if f.changeable)
# What an identity recorded before a field existed meant (every such checkpoint ran the default operator).
_RECORDED_BEFORE = {"operator": DEFAULT_OPERATOR}


def run_identity(*, protocol: str, knobs: dict[str, Any] | None, input_dir: str | Path | None, workload: WorkloadSpec | None,
                 shuffle_partitions: int | str | None, state_store: str | None, compact_min_records: int | None,
                 gap_timeout_ms: int | None, operator: str | None = None) -> dict[str, Any]:
    """The identity of a run, as recorded (every ``IDENTITY_FIELDS`` name, JSON values;
    ``operator`` None: the default, ``applyInPandasWithState``)."""
    from .operators import operator_named
    from .storage import is_uri

    shown_workload = None
    if workload is not None:
        import hashlib

        spec = workload.profile_spec
        shown_workload = {
            "profile": workload.profile, "seed": workload.seed, "partitions": workload.partitions,
            "steps_per_batch": workload.steps_per_batch, "generator": workload.generator,
            "profile_digest": "sha256:" + hashlib.sha256(spec.encode("utf-8")).hexdigest()[:16] if spec else None,
        }
    return {
        "protocol": protocol,
        "knobs": {k: knobs[k] for k in sorted(knobs or {})},
        "input": None if input_dir is None else str(input_dir) if is_uri(input_dir) else str(Path(input_dir).resolve()),
        "workload": shown_workload,
        "shuffle_partitions": None if shuffle_partitions is None else int(shuffle_partitions),
        "state_store": state_store or "hdfs",
        "compact_min_records": compact_min_records,
        "gap_timeout_ms": gap_timeout_ms,
        "state_schema_version": _state_schema_version(),
        "operator": operator_named(operator).name,
    }


def identity_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The names of the identity fields whose values differ, in ``IDENTITY_FIELDS`` order."""
    return [name for name in IDENTITY_NAMES if recorded.get(name, _RECORDED_BEFORE.get(name)) != current.get(name)]


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
    leases: list["Lease"] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def release(self) -> None:
        for lease in reversed(self.leases):
            lease.release()
        self.leases.clear()
        for _path, fd in reversed(self.held):
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


def lock_directory(directory: str | Path, what: str) -> Claim:
    """Lock a local ``directory`` as a running job does (``replemu compact`` on an output);
    ``CheckpointError`` when a running job holds it."""
    claim = Claim()
    _lock(Path(directory), what, claim)
    return claim


LEASE_S = 60.0  # a lease not renewed for this long belongs to a job that died
RENEW_S = 15.0


class Lease:
    """The lock of a directory on a Hadoop filesystem, where there is no ``flock``: ``replemu.lock``
    names its holder and when it last renewed the lease; a thread renews it every ``RENEW_S``,
    and a lease older than ``LEASE_S`` was left by a job that died and is taken over.  Object
    stores have no atomic create-if-absent, so two jobs starting in the same second are told
    apart only by reading the lease back."""

    def __init__(self, store, what: str, claim: Claim) -> None:
        import threading

        self.store, self.what = store, what
        now = time.time()
        held = self._read()
        if held and now - held.get("renewed", 0) < LEASE_S:
            raise CheckpointError(f"{what} {store.location} is in use by another running job ({held.get('holder')}, "
                                  f"lease renewed {now - held.get('renewed', 0):.0f} s ago); stop it first, or use another "
                                  f"directory (a dead job's lease expires {LEASE_S:.0f} s after its last renewal)")
        if held:
            claim.notes.append(f"{what} {store.location}: took over the lease of a job that ended without releasing it "
                               f"({held.get('holder')})")
        self.me = f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"
        self._renew()
        time.sleep(1.0)  # a job that wrote in the same moment: whoever reads itself back holds it
        if (self._read() or {}).get("holder") != self.me:
            raise CheckpointError(f"{what} {store.location}: another job claimed it at the same moment; try again")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, name=f"replemu-lease-{what}", daemon=True)
        self._thread.start()

    def _read(self) -> dict | None:
        if not self.store.exists(LOCK_FILE):
            return None
        try:
            doc = json.loads(self.store.read_bytes(LOCK_FILE).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None
        return doc if isinstance(doc, dict) else None

    def _renew(self) -> None:
        self.store.write_bytes(LOCK_FILE, json.dumps({"holder": self.me, "renewed": time.time()}).encode("utf-8") + b"\n")

    def _keep(self) -> None:
        while not self._stop.wait(RENEW_S):
            try:
                self._renew()
            except Exception:  # noqa: BLE001 - the next renewal tries again
                pass

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        self.store.remove(LOCK_FILE)


def _has_batches(store) -> bool:
    """Whether the output holds micro-batches (fresh or compacted: ``streaming.output_layout``)."""
    from .output_layout import has_batches

    return has_batches(store)


def claim_run(checkpoint_dir: str | Path, output_dir: str | Path, identity: dict[str, Any],
              allow_changes: tuple[str, ...] = (), spark=None) -> Claim:
    """Lock the checkpoint and the output directory, then check (first start: record) the identity.

    Plain paths are checked and locked (``flock``) before Spark starts; Hadoop URIs
    (``streaming.storage``) need ``spark``'s driver JVM and are locked with a ``Lease``.
    Raises ``CheckpointError`` naming each problem; on error nothing is left locked or written.
    """
    from .storage import LocalStore, StoreError, is_uri, open_store

    for path, flag in ((checkpoint_dir, "--checkpoint"), (output_dir, "--output")):
        problem = None if is_uri(path) else directory_problem(path, flag)
        if problem:
            raise CheckpointError(problem)
    if _nested(checkpoint_dir, output_dir):
        raise CheckpointError(f"--checkpoint {checkpoint_dir} and --output {output_dir}: give two separate directories "
                              f"(neither inside the other)")
    unknown = [n for n in allow_changes if n not in IDENTITY_NAMES]
    if unknown:
        raise CheckpointError(f"--allow-change {unknown[0]!r}: not an identity field (fields: {', '.join(IDENTITY_NAMES)})")
    claim = Claim()
    try:
        ck, out = open_store(checkpoint_dir, spark), open_store(output_dir, spark)
        for store, what in ((ck, "checkpoint"), (out, "output directory")):
            if isinstance(store, LocalStore):
                _lock(store.root, what, claim)
            else:
                store.mkdirs()
                claim.leases.append(Lease(store, what, claim))
        _check_identity(ck, out, identity, allow_changes, claim)
    except StoreError as exc:
        claim.release()
        raise CheckpointError(str(exc)) from None
    except BaseException:
        claim.release()
        raise
    return claim


def _nested(a: str | Path, b: str | Path) -> bool:
    """Whether two locations are the same or one is inside the other."""
    from .storage import is_uri

    if is_uri(a) or is_uri(b):
        x, y = str(a).rstrip("/") + "/", str(b).rstrip("/") + "/"
        return x.startswith(y) or y.startswith(x)
    x, y = Path(a).resolve(), Path(b).resolve()
    return x == y or x in y.parents or y in x.parents


def read_identity(checkpoint) -> dict[str, Any] | None:
    """The identity document of a checkpoint (a path or a ``streaming.storage`` store), or None."""
    from .storage import LocalStore

    store = checkpoint if hasattr(checkpoint, "read_bytes") else LocalStore(checkpoint)
    where = f"{store.location}/{IDENTITY_FILE}"
    if not store.exists(IDENTITY_FILE):
        return None
    try:
        doc = json.loads(store.read_bytes(IDENTITY_FILE).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{where}: unreadable run identity ({exc}); the checkpoint cannot be checked") from None
    if not isinstance(doc, dict) or doc.get("format") != IDENTITY_FORMAT or not isinstance(doc.get("identity"), dict):
        raise CheckpointError(f"{where}: not a replemu run identity (format {IDENTITY_FORMAT})")
    return doc


def _write_identity(store, doc: dict[str, Any]) -> None:
    store.write_bytes(IDENTITY_FILE, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def _check_identity(ck, out, identity: dict[str, Any], allow: tuple[str, ...], claim: Claim) -> None:
    checkpoint_dir, output_dir = ck.location, out.location
    doc = read_identity(ck)
    spark_state = ck.exists("offsets") or any(ck.exists(f"{child}/offsets") for child in ck.list())
    if doc is None:
        if spark_state:
            raise CheckpointError(f"--checkpoint {checkpoint_dir}: holds a stream's offsets but no {IDENTITY_FILE}: "
                                  f"it was not written by this version of replemu, so what it holds cannot be checked")
        if _has_batches(out):
            raise CheckpointError(f"--output {output_dir}: holds micro-batches of an earlier run, but the checkpoint "
                                  f"{checkpoint_dir} is new: the new run would mix its batches with them; give an empty "
                                  f"output directory (or the earlier run's checkpoint)")
        _write_identity(ck, {"format": IDENTITY_FORMAT, "identity": identity, "history": []})
        return
    _check_output_kept(ck, out)
    recorded = doc["identity"]
    differences = identity_differences(recorded, identity)
    refused = [n for n in differences if n not in allow or not _CHANGEABLE[n]]
    if refused:
        lines = [f"  {n}: checkpoint {_short(recorded.get(n, _RECORDED_BEFORE.get(n)))}, this run {_short(identity.get(n))}"
                 for n in refused]
        fixed = [n for n in refused if not _CHANGEABLE[n]]
        hint = (f"a checkpoint's {', '.join(fixed)} cannot change: start a new checkpoint" if fixed else
                "give the checkpoint's values, use a new checkpoint, or allow each difference with "
                + " ".join(f"--allow-change {n}" for n in refused))
        raise CheckpointError(f"--checkpoint {checkpoint_dir} was created by a different run:\n" + "\n".join(lines) + f"\n{hint}")
    if differences:
        doc["history"].append({"identity": recorded, "changed": differences})
        doc["identity"] = identity
        _write_identity(ck, doc)
        claim.notes.append(f"checkpoint {checkpoint_dir}: allowed changes of {', '.join(differences)} recorded in {IDENTITY_FILE}")


RUN_FILE = "run.json"  # what the job writes into OUTPUT before its first micro-batch (streaming.job)


def _check_output_kept(ck, out) -> None:
    """Refuse a restart whose output lacks the ``run.json`` the job wrote before the checkpoint's
    first commit: the output was removed (or another directory given), and Spark never runs a
    committed micro-batch again, so the restart would write only the later ones — a silent loss.
    With ``--protocol all`` each variant's checkpoint and output are checked."""
    pairs = [("", "")] if ck.exists("commits") else [(f"{c}/", f"{c}/") for c in ck.list() if ck.exists(f"{c}/commits")]
    for ck_sub, out_sub in pairs:
        committed = [n for n in ck.list(f"{ck_sub}commits") if n.isdigit()]
        if committed and not out.exists(f"{out_sub}{RUN_FILE}"):
            where = f"{out.location}/{out_sub}".rstrip("/")
            ck_where = f"{ck.location}/{ck_sub}".rstrip("/")
            raise CheckpointError(
                f"--output {where}: holds none of the {len(committed)} micro-batch(es) the checkpoint "
                f"{ck_where} has committed (no {RUN_FILE}: removed, or another directory); "
                f"Spark never runs a committed micro-batch again, so this run would write only the later ones. "
                f"Restore the output from a copy, or start over with a new checkpoint (move this one away)")


def _state_schema_version() -> int:
    """``streaming.schemas.STATE_SCHEMA_VERSION``, imported when an identity is built: the schemas
    import pyspark, which ``replemu --help`` and ``replemu run`` (which import this module for
    ``--allow-change``'s help) must not pay for."""
    from .schemas import STATE_SCHEMA_VERSION

    return STATE_SCHEMA_VERSION
