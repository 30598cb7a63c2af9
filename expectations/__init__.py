"""Great Expectations suites generated from ``emulator.invariants.REGISTRY`` (issue 4).

Not built yet; the registry already carries the exact invariant names the suites will use.
"""
