"""Where the job writes: a local directory, or any Hadoop-compatible URI.

``--output`` and ``--checkpoint`` are plain paths or URIs (``hdfs://…``, ``s3a://…``,
``abfss://…``, ``gs://…``, ``file:///…``).  Spark reads and writes the checkpoint itself; what
replemu writes beside it (the run identity, the lock) and the whole output directory go through
a ``Store``:

- ``LocalStore``: a plain path, through the local filesystem (os calls, ``flock``).
- ``HadoopStore``: a URI, through the driver JVM's Hadoop ``FileSystem`` for that URI — the same
  client, configuration and credentials Spark uses for the checkpoint, so whatever Spark can
  reach, the outputs can.  It needs the driver's JVM (classic Spark, not Spark Connect).

Both write a file aside and rename it into place, so a reader never sees half of one.  A
``file://`` URI goes through Hadoop too (its local filesystem): that is how the tests exercise
this path without a cluster.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Iterator

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(location: str | os.PathLike) -> bool:
    """Whether ``location`` names a Hadoop filesystem (``scheme://…``) rather than a local path."""
    return bool(_URI.match(str(location)))


def join(location: str | os.PathLike, *parts: str) -> str:
    """``location`` / ``parts``, for a path or a URI."""
    text = str(location)
    if not is_uri(text):
        return str(Path(text, *parts))
    return "/".join([text.rstrip("/"), *parts])


class StoreError(OSError):
    pass


class LocalStore:
    """A local directory."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.location = str(self.root)

    def _p(self, rel: str) -> Path:
        return self.root / rel if rel else self.root

    def exists(self, rel: str = "") -> bool:
        return self._p(rel).exists()

    def mkdirs(self, rel: str = "") -> None:
        self._p(rel).mkdir(parents=True, exist_ok=True)

    def list(self, rel: str = "") -> list[str]:
        p = self._p(rel)
        return sorted(c.name for c in p.iterdir()) if p.is_dir() else []

    def read_bytes(self, rel: str) -> bytes:
        return self._p(rel).read_bytes()

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write ``rel`` aside, then rename it into place."""
        target = self._p(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)

    def append_line(self, rel: str, line: str) -> None:
        self._p(rel).parent.mkdir(parents=True, exist_ok=True)
        with open(self._p(rel), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def remove(self, rel: str) -> None:
        p = self._p(rel)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()

    def uri(self, rel: str = "") -> str:
        """``rel`` as a location Spark's writers and readers take."""
        return str(self._p(rel).resolve())

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` (a file or a directory; ``dst`` must not exist)."""
        os.replace(self._p(src), self._p(dst))

    def replace_dir(self, rel: str, files: dict[str, bytes]) -> None:
        """Replace the directory ``rel`` by one holding ``files``: written aside, then swapped in."""
        target = self._p(rel)
        tmp = target.with_name(f".{target.name}.tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)


class HadoopStore:
    """A directory of a Hadoop filesystem, through the driver JVM (``jvm``, ``hadoop_conf``)."""

    def __init__(self, location: str, jvm, hadoop_conf) -> None:
        self.location = location.rstrip("/")
        self._jvm = jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self.root_path = self._Path(self.location)
        try:
            self.fs = self.root_path.getFileSystem(hadoop_conf)
        except Exception as exc:  # py4j's error: the JVM's message, first line
            raise StoreError(f"{location}: no Hadoop filesystem for this URI ({_java_message(exc)})") from None

    def _p(self, rel: str):
        return self._Path(f"{self.location}/{rel}") if rel else self.root_path

    def _call(self, what: str, fn, *args):
        try:
            return fn(*args)
        except Exception as exc:
            raise StoreError(f"{self.location}: {what} failed: {_java_message(exc)}") from None

    def exists(self, rel: str = "") -> bool:
        return bool(self._call(f"exists {rel}", self.fs.exists, self._p(rel)))

    def mkdirs(self, rel: str = "") -> None:
        self._call(f"mkdirs {rel}", self.fs.mkdirs, self._p(rel))

    def list(self, rel: str = "") -> list[str]:
        if not self.exists(rel):
            return []
        statuses = self._call(f"list {rel}", self.fs.listStatus, self._p(rel))
        return sorted(s.getPath().getName() for s in statuses)

    def read_bytes(self, rel: str) -> bytes:
        stream = self._call(f"open {rel}", self.fs.open, self._p(rel))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def _write(self, path, data: bytes) -> None:
        out = self._call(f"create {path.toString()}", self.fs.create, path, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()

    def write_bytes(self, rel: str, data: bytes) -> None:
        target = self._p(rel)
        tmp = self._Path(target.getParent(), f".{target.getName()}.tmp")
        self._write(tmp, data)
        if self.fs.exists(target):
            self._call(f"delete {rel}", self.fs.delete, target, False)
        if not self._call(f"rename to {rel}", self.fs.rename, tmp, target):
            raise StoreError(f"{self.location}: could not rename {tmp.toString()} to {target.toString()}")

    def append_line(self, rel: str, line: str) -> None:
        """Append where the filesystem can (HDFS), else rewrite the file (object stores)."""
        data = (line + "\n").encode("utf-8")
        path = self._p(rel)
        if self.fs.exists(path):
            try:
                out = self.fs.append(path)
            except Exception:  # noqa: BLE001 - UnsupportedOperationException: rewrite it
                self.write_bytes(rel, self.read_bytes(rel) + data)
                return
            try:
                out.write(bytearray(data))
            finally:
                out.close()
        else:
            self.write_bytes(rel, data)

    def remove(self, rel: str) -> None:
        path = self._p(rel)
        if self.fs.exists(path):
            self._call(f"delete {rel}", self.fs.delete, path, True)

    def uri(self, rel: str = "") -> str:
        return f"{self.location}/{rel}" if rel else self.location

    def rename(self, src: str, dst: str) -> None:
        if not self._call(f"rename {src} to {dst}", self.fs.rename, self._p(src), self._p(dst)):
            raise StoreError(f"{self.location}: could not rename {src} to {dst}")

    def replace_dir(self, rel: str, files: dict[str, bytes]) -> None:
        target = self._p(rel)
        tmp = self._Path(target.getParent(), f".{target.getName()}.tmp")
        if self.fs.exists(tmp):
            self.fs.delete(tmp, True)
        self._call(f"mkdirs {tmp.toString()}", self.fs.mkdirs, tmp)
        for name, data in files.items():
            self._write(self._Path(tmp, name), data)
        if self.fs.exists(target):
            self._call(f"delete {rel}", self.fs.delete, target, True)
        if not self._call(f"rename to {rel}", self.fs.rename, tmp, target):
            raise StoreError(f"{self.location}: could not rename {tmp.toString()} to {target.toString()}")

    def walk_files(self, rel: str = "") -> Iterator[str]:
        """Every file under ``rel``, as paths relative to the store's root."""
        for name in self.list(rel):
            child = f"{rel}/{name}" if rel else name
            if self.fs.getFileStatus(self._p(child)).isDirectory():
                yield from self.walk_files(child)
            else:
                yield child


def _java_message(exc: Exception) -> str:
    text = str(getattr(exc, "java_exception", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def open_store(location: str | os.PathLike, spark=None):
    """The ``Store`` of ``location``: local for a path, Hadoop (through ``spark``'s JVM) for a URI."""
    if not is_uri(location):
        return LocalStore(location)
    jvm, conf = _driver_jvm(spark)
    if jvm is None:
        raise StoreError(f"{location}: a Hadoop URI needs the driver's JVM (classic Spark); through Spark Connect give "
                         f"a path on the Connect server")
    return HadoopStore(str(location), jvm, conf)


def _driver_jvm(spark):
    """The driver JVM and Hadoop configuration, or (None, None) under Spark Connect."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None, None
    from streaming.session import is_connect

    sc = getattr(spark, "sparkContext", None) if spark is not None and not is_connect(spark) else None
    sc = sc or SparkContext._active_spark_context
    if sc is None or getattr(sc, "_jvm", None) is None:
        return None, None
    return sc._jvm, sc._jsc.hadoopConfiguration()



class Mirror:
    """A local directory standing in for a remote store, for code that writes local files (GX).

    Starts with a copy of the store's ``keep`` subdirectories (what such code reads back on a
    restart); ``upload_changes`` copies every file created or changed since the last upload to
    the same place in the store."""

    def __init__(self, store, keep: tuple[str, ...] = ()) -> None:
        import hashlib
        import tempfile

        digest = hashlib.sha256(store.location.encode("utf-8")).hexdigest()[:16]
        self.store = store
        self.local = Path(tempfile.gettempdir()) / f"replemu-mirror-{digest}"
        if self.local.exists():
            shutil.rmtree(self.local)
        self.local.mkdir(parents=True)
        for sub in keep:
            for rel in store.walk_files(sub) if store.exists(sub) else ():
                target = self.local / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(store.read_bytes(rel))
        self._uploaded = self._scan()

    def _scan(self) -> dict[str, tuple[int, int]]:
        seen = {}
        for dirpath, _, filenames in os.walk(self.local):
            for name in filenames:
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                seen[os.path.relpath(path, self.local)] = (st.st_size, st.st_mtime_ns)
        return seen

    def upload_changes(self) -> int:
        """Copy new and changed files to the store; returns how many."""
        now = self._scan()
        changed = sorted(rel for rel, sig in now.items() if self._uploaded.get(rel) != sig)
        for rel in changed:
            self.store.write_bytes(Path(rel).as_posix(), (self.local / rel).read_bytes())
        self._uploaded = now
        return len(changed)
