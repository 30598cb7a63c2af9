"""The Spark Structured Streaming adapter: event sources, the per-partition batch function, the
state codec, the Parquet sinks, and reading a job's outputs back (``streaming.results``).
Imports ``emulator`` only."""
