"""The processes of a ``replemu`` command started with ``start_new_session=True``.

The command runs in a session of its own; the driver's JVM runs in another one it starts (see
``streaming.session._launch_jvm_in_own_session``), and the Python workers in the JVM's.  A test that
kills "everything" must find both sessions while the driver is still alive: once the driver is
gone the JVM is re-parented and nothing links it to the command any more."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` is the state, ``[1]``
    the parent, ``[3]`` the session ... as proc(5) numbers them from 3), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def _stat(pid: str) -> tuple[str, int, int] | None:
    rest = stat_fields(pid)
    return None if rest is None else (rest[0], int(rest[1]), int(rest[3]))  # state, ppid, session


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


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a socket listening on TCP ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(socket.inet_ntop(socket.AF_INET if width == 8 else socket.AF_INET6,
                                           b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, width, 8))))
    return found


class ClusterWatch:
    """What a running ``replemu stream`` (started with ``start_new_session=True``, its stdout in
    ``stdout``) shows of itself while polled: its executor JVMs (``CoarseGrainedExecutorBackend``),
    the most alive at once, each one's Python workers (``pyspark.daemon`` children) and the
    addresses its Spark UI listens on (from the port its first line names)."""

    def __init__(self, pid: int, stdout: Path) -> None:
        self.pid, self.stdout = pid, stdout
        self.executors: set[int] = set()
        self.max_alive = 0
        self.workers_of: dict[int, set[int]] = {}
        self.ui: set[str] | None = None

    def poll(self) -> None:
        procs = job_processes({self.pid})
        named = {pid: ppid for pid, ppid, cmd in procs if "CoarseGrainedExecutorBackend" in cmd}
        # a process an executor is forking (its Python daemon, before the exec) carries the
        # executor's command line for a moment: an executor is one whose parent is not one
        alive = {pid for pid, ppid in named.items() if ppid not in named and ppid not in self.executors}
        self.executors, self.max_alive = self.executors | alive, max(self.max_alive, len(alive))
        for pid, ppid, cmd in procs:
            if ppid in self.executors and "pyspark.daemon" in cmd:
                self.workers_of.setdefault(ppid, set()).add(pid)
        if self.ui is None and (m := re.search(r"Spark UI: http://[^:/]+:(\d+)", self.stdout.read_text())):
            self.ui = listening_addresses(int(m.group(1)))


# -- the role of each process of a job (scripts/bench_scaleout.py samples RSS and CPU by role) --

DRIVER_ROLES = ("driver Python", "driver JVM", "source planner", "source generators", "driver Python workers")
EXECUTOR_ROLES = ("executor JVMs", "executor Python")
ROLES = DRIVER_ROLES + EXECUTOR_ROLES
SOURCE_RUNNER = "python_streaming_source_runner"  # the Python streaming source's planner (pyspark)


def roles(procs: list[tuple[int, int, str]], driver: int) -> dict[int, str]:
    """The role (one of ``ROLES``) of each process of ``job_processes``; ``driver`` is the pid of
    the ``replemu`` command (the driver's Python).

    By command line and parentage: an executor is a ``CoarseGrainedExecutorBackend`` JVM (in
    ``local-cluster`` a child of the driver's JVM, on a standalone cluster a worker's child) and
    every process below it is one of its Python workers (``pyspark.daemon`` and what it forks);
    the Python source's planner runs ``python_streaming_source_runner`` (a child of the driver's
    JVM) and the processes it forks (same command line) are its generators; any other Java
    process is the driver's JVM (``spark-class`` execs it in the pid of the bash that started it,
    so the launcher's short-lived bash and java count there too), and any other process below it
    is one of the driver's Python workers (data-source planning, ...); the rest, the ``replemu``
    process and anything it forks but the JVM, is the driver's Python."""
    parent = {pid: ppid for pid, ppid, _ in procs}
    cmd = {pid: c for pid, _, c in procs}

    def java(pid: int) -> bool:
        first = cmd[pid].split(" ", 1)[0]
        return first.endswith("/java") or first == "java" or "spark-class" in cmd[pid]

    def own(pid: int) -> str | None:
        """The role a process has by itself, None for one that takes it from its ancestors."""
        if pid == driver:
            return "driver Python"
        if "CoarseGrainedExecutorBackend" in cmd[pid]:
            return "executor JVMs"
        if SOURCE_RUNNER in cmd[pid]:
            return "source generators" if SOURCE_RUNNER in cmd.get(parent[pid], "") else "source planner"
        if java(pid):
            return "driver JVM"
        return None

    below = {"executor JVMs": "executor Python", "executor Python": "executor Python", "driver JVM": "driver Python workers",
             "driver Python workers": "driver Python workers", "source planner": "source generators",
             "source generators": "source generators", "driver Python": "driver Python"}
    out: dict[int, str] = {}

    def role(pid: int) -> str:
        if pid not in out:
            mine = own(pid)
            if mine is None:
                ancestor = parent.get(pid)
                mine = below[role(ancestor)] if ancestor in cmd and ancestor != pid else "driver Python"
            out[pid] = mine
        return out[pid]

    for pid in cmd:
        role(pid)
    return out
