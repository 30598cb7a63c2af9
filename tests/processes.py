"""The processes of a ``replemu`` command started with ``start_new_session=True``.

The command runs in a session of its own; the driver's JVM runs in another one it starts (see
``streaming.session._launch_jvm_in_own_session``), and the Python workers in the JVM's.  A test that
kills "everything" must find both sessions while the driver is still alive: once the driver is
gone the JVM is re-parented and nothing links it to the command any more."""

from __future__ import annotations

import os
import signal
import time


def _stat(pid: str) -> tuple[str, int, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    rest = stat[stat.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[3])  # state, ppid, session


def job_processes(sessions: set[int]) -> list[tuple[int, int, str]]:
    """(pid, ppid, command line) of the live processes of ``sessions``.

    A session started by a child of one of them (the JVM's) is added to ``sessions`` in place."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(name)) is not None and st[0] not in ("Z", "X"):
            table[int(name)] = st
    grew = True
    while grew:
        grew = False
        for pid, (_, ppid, sid) in table.items():
            if sid == pid and sid not in sessions and ppid in table and table[ppid][2] in sessions:
                sessions.add(sid)
                grew = True
    out = []
    for pid, (_, ppid, sid) in sorted(table.items()):
        if sid in sessions:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            out.append((pid, ppid, cmd))
    return out


def kill_job(sessions: set[int], sig: int = signal.SIGKILL, timeout_s: float = 60) -> None:
    """Send ``sig`` to every process of ``sessions`` (and of the sessions they started) at once;
    for SIGKILL, wait until none is left."""
    job_processes(sessions)  # find the JVM's session while the driver still links to it
    for sid in sorted(sessions):
        try:
            os.killpg(sid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    if sig != signal.SIGKILL:
        return
    deadline = time.monotonic() + timeout_s
    while rest := job_processes(sessions):
        for pid, _, _ in rest:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of the killed job survive: {rest}")
        time.sleep(0.05)
