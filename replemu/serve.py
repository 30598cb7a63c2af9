"""``replemu serve OUTPUT_DIR``: a local web app over a running or finished stream's outputs.

The page is the static dashboard's page (``replemu/assets/``, rendered client-side by
``app.js``); here the script fetches its JSON from the endpoints below instead of finding it
inlined, and polls ``/api/status`` (directory listings only) every two seconds, fetching only
the batches that landed or changed since, so a page left open follows the job.

Endpoints (GET and HEAD only; every other method is refused with 405):

    /                                      the page
    /assets/app.js, /assets/style.css      the page's script and styles (packaged)
    /metrics                               Prometheus' text format (replemu.metrics): batches, steps
                                           applied, violations, quarantined rows, duration, state bytes
    /api/status                            the runs (variants) and their batches, one signature each
    /api/runs/RUN/overview                 partitions by status, the variant × invariant row
    /api/runs/RUN/batches?ids=0,1          per batch: progress, violations, expectation results
    /api/runs/RUN/partition?topic=T&partition=P        one partition: timeline, log operations, findings
    /api/runs/RUN/logs?topic=T&partition=P&step=S      every replica's log after step S
    /runs/RUN/data_docs/PATH               the run's GX Data Docs (files under OUTPUT[/VARIANT]/data_docs)

``RUN`` is ``-`` for a single stream output, else the variant's directory name (``--protocol
all``).  Nothing outside OUTPUT_DIR is served: paths with ``..`` or ``.`` segments, absolute
paths, backslashes and NUL bytes are refused, the joined path is checked with werkzeug's
``safe_join`` and then resolved (symbolic links included) and must still lie in OUTPUT_DIR.
The server binds to 127.0.0.1 unless told otherwise; bound to a loopback address it also
refuses requests whose Host header is not a loopback name (a page on another site cannot
reach it by DNS rebinding).  ``cmd_serve`` is the command.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from emulator.bounds import short_repr
from emulator.invariants import INVARIANT_NAMES

from .cli_common import fail
from .dashboard import STATUSES, RunReader, asset_text, inside, page_html, stream_run_dirs

POLL_MS = 2000
# What one request may ask for: a response's size follows the outputs, never the request's length
# (``ids=1,1,1,...`` once returned a batch per listed id: 182 MB for a 60 KB request).
MAX_BATCH_IDS = 1000  # ids listed in one /batches request (the page asks for every batch beyond it)
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
SERVED_ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
PAGE_CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
# GX's pages carry inline scripts; nothing of theirs may come from another host either.
DOCS_CSP = "default-src 'self' 'unsafe-inline' 'unsafe-eval' data:; base-uri 'none'; form-action 'none'"


class ServeError(ValueError):
    pass


def output_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be served (None when it can): it must be a stream output directory
    (``run.json``), the parent of per-variant ones, or one whose job has just started."""
    p = Path(path)
    if not p.exists():
        return f"OUTPUT_DIR {path}: does not exist"
    if not p.is_dir():
        return f"OUTPUT_DIR {path}: is not a directory"
    if not os.access(p, os.R_OK | os.X_OK):
        return f"OUTPUT_DIR {path}: not readable"
    if stream_run_dirs(p) is None:
        return (f"OUTPUT_DIR {path}: not a stream output (no run.json or replemu.lock, and no per-variant "
                f"outputs of --protocol all); give the --output directory of replemu stream")
    return None


class Runs:
    """The runs under OUTPUT_DIR, found again at every status request (``--protocol all``
    starts its variants one after another), each with its cached reader."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._readers: dict[str, RunReader] = {}
        self._lock = threading.Lock()

    def current(self) -> list[RunReader]:
        found = stream_run_dirs(self.root) or []
        with self._lock:
            readers = []
            for run_id, path in found:
                reader = self._readers.get(run_id)
                if reader is None or reader.out != path:
                    reader = self._readers[run_id] = RunReader(path, run_id, _docs_href(run_id))
                readers.append(reader)
            return readers

    def get(self, run_id: str) -> RunReader | None:
        return next((r for r in self.current() if r.run_id == run_id), None)


def _docs_href(run_id: str):
    def href(rel: str) -> str:
        return f"/runs/{quote(run_id, safe='')}/data_docs/{quote(rel)}"
    return href


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The host name of a Host header (``127.0.0.1:8050``, ``[::1]:8050``, ``localhost``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class _Guard:
    """WSGI middleware in front of Flask: GET and HEAD only; on a loopback address, loopback
    Host headers only."""

    def __init__(self, app, loopback_only: bool) -> None:
        self.app = app
        self.loopback_only = loopback_only

    def __call__(self, environ, start_response):
        def refuse(status: str, text: str, extra: list | None = None):
            body = (text + "\n").encode()
            start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))] + (extra or []))
            return [body]

        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return refuse("405 Method Not Allowed", "replemu serve only reads: GET and HEAD", [("Allow", "GET, HEAD")])
        if self.loopback_only and _host_name(environ.get("HTTP_HOST") or "") not in LOOPBACK_NAMES:
            return refuse("400 Bad Request", "replemu serve answers only requests addressed to a loopback name")
        return self.app(environ, start_response)


def create_app(output_dir: str | Path, host: str = "127.0.0.1"):
    """The Flask application over ``output_dir`` (wrapped in the method and Host guard)."""
    from flask import Flask, Response, abort, request, send_file
    from werkzeug.security import safe_join

    root = Path(output_dir).resolve()
    runs = Runs(root)
    app = Flask("replemu.serve", static_folder=None)
    app.url_map.merge_slashes = False  # "//etc/passwd" is refused, not redirected

    def as_json(data: Any, status: int = 200) -> Response:
        response = Response(json.dumps(data, separators=(",", ":")), status=status, mimetype="application/json")
        response.headers["Cache-Control"] = "no-store"
        return response

    def error(status: int, message: str) -> Response:
        return as_json({"error": message}, status)

    def reader_or_404(run_id: str) -> RunReader:
        reader = runs.get(run_id)
        if reader is None:
            abort(error(404, f"no run {short_repr(run_id, 80)} in this output directory"))
        return reader

    def int_arg(name: str, low: int = -(2**63), high: int = 2**63 - 1) -> int:
        text = request.args.get(name)
        try:
            value = int(text)
        except (TypeError, ValueError):
            abort(error(400, f"{name}: give an integer"))
        if not low <= value <= high:
            abort(error(400, f"{name}: out of range"))
        return value

    def topic_arg() -> str:
        topic = request.args.get("topic")
        if topic is None or len(topic) > 1000:
            abort(error(400, "topic: give the partition's topic"))
        return topic

    @app.after_request
    def headers(response: Response) -> Response:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("Content-Security-Policy", PAGE_CSP)
        return response

    @app.get("/")
    def index() -> Response:
        boot = {"mode": "served", "invariants": list(INVARIANT_NAMES), "statuses": list(STATUSES), "poll_ms": POLL_MS,
                "root": str(root), "max_batch_ids": MAX_BATCH_IDS}
        response = Response(page_html(f"replemu serve: {root}", boot, inline=False), mimetype="text/html")
        response.headers["Cache-Control"] = "no-store"
        return response

    @app.get("/assets/<name>")
    def asset(name: str) -> Response:
        if name not in SERVED_ASSETS:
            abort(404)
        response = Response(asset_text(name), mimetype=SERVED_ASSETS[name])
        response.headers["Cache-Control"] = "no-cache"
        return response

    @app.get("/metrics")
    def metrics() -> Response:
        """Prometheus' text format (replemu.metrics): what the runs applied, found and cost."""
        from .metrics import exposition

        body, content_type = exposition(runs.current)
        response = Response(body, content_type=content_type)
        response.headers["Cache-Control"] = "no-store"
        return response

    @app.get("/api/status")
    def status() -> Response:
        current = runs.current()
        return as_json({"root": str(root), "runs": [r.status() for r in current], "started": bool(current)})

    @app.get("/api/runs/<run_id>/overview")
    def overview(run_id: str) -> Response:
        return as_json(reader_or_404(run_id).overview())

    @app.get("/api/runs/<run_id>/batches")
    def batches(run_id: str) -> Response:
        reader = reader_or_404(run_id)
        text = request.args.get("ids")
        ids = None
        if text:
            listed = text.split(",", MAX_BATCH_IDS)
            if len(listed) > MAX_BATCH_IDS:
                abort(error(400, f"ids: at most {MAX_BATCH_IDS:,} batch ids in one request (without ids: every batch)"))
            try:
                if any(len(x) > 24 for x in listed):
                    raise ValueError
                ids = sorted({int(x) for x in listed})  # each batch once, in batch order
            except ValueError:
                abort(error(400, "ids: give batch ids separated by commas"))
        return as_json(reader.batches(ids))

    @app.get("/api/runs/<run_id>/partition")
    def partition(run_id: str) -> Response:
        reader = reader_or_404(run_id)
        topic, number = topic_arg(), int_arg("partition", -(2**31), 2**31 - 1)
        entry = reader.partition(topic, number)
        if entry is None:
            return error(404, f"no partition {short_repr(topic, 80)}/{number} in the outputs")
        return as_json(entry)

    @app.get("/api/runs/<run_id>/logs")
    def logs(run_id: str) -> Response:
        reader = reader_or_404(run_id)
        topic, number, step = topic_arg(), int_arg("partition", -(2**31), 2**31 - 1), int_arg("step")
        found = reader.logs_at(topic, number, step)
        if found is None:
            return error(404, f"no partition {short_repr(topic, 80)}/{number} in the outputs")
        return as_json({"topic": topic, "partition": number, "step": step, "replicas": found})

    @app.get("/runs/<run_id>/data_docs/")
    @app.get("/runs/<run_id>/data_docs/<path:rel>")
    def data_docs(run_id: str, rel: str = "") -> Response:
        reader = reader_or_404(run_id)
        base = reader.out / "data_docs"
        segments = rel.split("/")
        if "\x00" in rel or "\\" in rel or rel.startswith("/") or any(s in ("..", ".") for s in segments):
            abort(404)
        joined = safe_join(str(base), rel) if rel else str(base)
        if joined is None:
            abort(404)
        target = Path(joined)
        if target.is_dir():
            target = target / "index.html"
        if not (inside(root, target) and inside(base, target) and target.is_file()):
            abort(404)
        response = send_file(os.path.realpath(target), conditional=True, max_age=0)
        response.headers["Content-Security-Policy"] = DOCS_CSP
        return response

    @app.errorhandler(404)
    def not_found(exc) -> Response:
        return Response("not found\n", status=404, mimetype="text/plain")

    @app.errorhandler(405)
    def not_allowed(exc) -> Response:
        return Response("replemu serve only reads: GET and HEAD\n", status=405, mimetype="text/plain",
                        headers={"Allow": "GET, HEAD"})

    return _Guard(app, _loopback(host))


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket (bound here, so that a port in use is one line and exit 2, not
    werkzeug's two lines and exit 1)."""
    from werkzeug.serving import get_sockaddr, select_address_family

    if host.startswith("unix://"):
        raise ServeError(f"--host {host}: give a host name or an IP address")
    family = select_address_family(host, port)
    try:
        address = get_sockaddr(host, port, family)
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ServeError(f"--host {host}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = "already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        # the port's fault only when it is taken or privileged; a name that does not resolve, or an
        # address not of this machine, is the host's
        flag = f"--port {port}" if exc.errno in (errno.EADDRINUSE, errno.EACCES) else f"--host {host}"
        raise ServeError(f"{flag}: cannot listen on {host}:{port} ({why})") from None
    return sock


def serve(output_dir: str | Path, host: str = "127.0.0.1", port: int = 8050, out=sys.stdout) -> int:
    """Serve until Ctrl-C (exit status 0).  Raises ``ServeError`` (one line) before serving
    when the directory, host or port will not do."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    problem = output_problem(output_dir)
    if problem:
        raise ServeError(problem)
    if not 0 <= port <= 65535:
        raise ServeError(f"--port {port}: out of range (0 to 65535; 0 picks a free port)")
    sock = _listen(host, port)

    class QuietHandler(WSGIRequestHandler):
        def log_request(self, code="-", size="-") -> None:  # the page polls every 2 s: no line per request
            pass

    try:
        server = make_server(host, port, create_app(output_dir, host), threaded=True, request_handler=QuietHandler,
                             fd=sock.fileno())
    finally:
        sock.close()  # the server holds its own descriptor of the socket
    shown = f"[{host}]" if ":" in host else host
    print(f"replemu serve: {Path(output_dir)} on http://{shown}:{server.port}/ (Ctrl-C stops)", file=out, flush=True)

    def on_signal(signum, frame) -> None:  # SIGINT and SIGTERM stop it alike
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        # set both explicitly: started in the background by a shell, SIGINT would be inherited ignored
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
    try:
        server.serve_forever()  # werkzeug's ends quietly on KeyboardInterrupt (Ctrl-C)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("replemu serve: stopped", file=out, flush=True)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        port = int(args.port)
    except ValueError:
        return fail(f"replemu: error: --port {args.port[:40]!r}: not an integer")
    try:
        return serve(args.output, host=args.host, port=port)
    except ServeError as exc:
        return fail(f"replemu: error: {exc}")
