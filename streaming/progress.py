"""What a running query reports: Spark's progress per micro-batch, printed as one line and kept
in ``OUTPUT/progress.jsonl`` by a ``StreamingQueryListener``."""

from __future__ import annotations

import json


def state_bytes(progress: dict) -> int:
    """The state store's memory in use after a micro-batch (Spark's ``stateOperators``)."""
    return sum(op.get("memoryUsedBytes", 0) or 0 for op in progress.get("stateOperators", []))


def input_rows(progress: dict) -> int:
    """A micro-batch's input rows.  Through Spark Connect (4.3) a query's ``recentProgress`` lacks
    the top-level ``numInputRows``; its sources carry them."""
    rows = progress.get("numInputRows")
    return rows if rows is not None else sum(s.get("numInputRows") or 0 for s in progress.get("sources") or [])


def input_unit(progress: dict) -> str:
    """What a micro-batch's input rows are: event files for the file source (read whole, one row
    each), ticks for the workload source (one per partition that advances: its steps are
    generated in the state function), events for the others."""
    sources = progress.get("sources") or []
    descriptions = [x.get("description") or "" for x in sources]
    if descriptions and all("FileStreamSource" in d for d in descriptions):
        return "files"
    if descriptions and all(".python.PythonMicroBatchStream" in d for d in descriptions):
        return "ticks"  # the only Python source replemu stream reads is the workload's
    return "rows"


def counted(n: int, one: str, many: str | None = None) -> str:
    """``1 violation``, ``2 violations``: a count with its noun in the right number."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def print_progress(progress: dict, stats: dict, out) -> None:
    """One line: the batch's input (``input_unit``), partitions, violations, quarantined rows,
    duration and state size; ``stats``: batch id -> the sink's ``BatchStats``."""
    batch_id = progress["batchId"]
    st = stats.get(batch_id)
    duration = progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
    extra = (f", {counted(st.partitions, 'partition')}, {counted(st.violations, 'violation')}, {st.quarantined} quarantined"
             if st else "")
    n, unit = input_rows(progress), input_unit(progress)
    print(f"batch {batch_id}: {n} {unit[:-1] if n == 1 else unit}{extra}, {duration:.2f} s, "
          f"state {state_bytes(progress) / 1024:.0f} KiB", file=out, flush=True)


PROGRESS_FILE = "progress.jsonl"


def progress_listener(store, query_name: str = "replemu"):
    """A ``StreamingQueryListener`` appending every micro-batch's ``StreamingQueryProgress`` JSON
    to the output ``store`` as one line (``OUTPUT/progress.jsonl``): the job's history after it ended.

    On a classic session the JVM hands it each progress as its JSON (``_ProgressJson``: two py4j
    calls a micro-batch) instead of pyspark's conversion of the whole event into Python objects
    (~30 calls and six Java exceptions converted, each resolved against every jar of the class
    path); through Spark Connect pyspark's own events arrive as JSON already."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressLog(StreamingQueryListener):
        def record(self, progress_json: str) -> None:
            progress = json.loads(progress_json)
            if progress.get("name") == query_name:
                store.append_line(PROGRESS_FILE, json.dumps(progress, separators=(",", ":")))

        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            self.record(event.progress.json)

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

        @property
        def _jlistener(self):  # what pyspark's classic StreamingQueryManager.addListener/removeListener register
            if not hasattr(self, "_jlistenerobj"):
                from pyspark import SparkContext

                self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(_ProgressJson(self))
            return self._jlistenerobj

    return ProgressLog()


class _ProgressJson:
    """The JVM's side of ``progress_listener`` on a classic session (a py4j callback): each
    progress event's JSON, read in the JVM, goes to ``log.record``; the other events are ignored."""

    def __init__(self, log) -> None:
        self.log = log

    def onQueryStarted(self, jevent) -> None:
        pass

    def onQueryProgress(self, jevent) -> None:
        self.log.record(jevent.progress().json())

    def onQueryIdle(self, jevent) -> None:
        pass

    def onQueryTerminated(self, jevent) -> None:
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
