"""The Spark Structured Streaming adapter (issue 3): decode, sort by sequence, step the core, encode.

Not built yet; ``emulator`` is the core it will step.
"""
