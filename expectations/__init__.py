"""Great Expectations suites generated from ``emulator.invariants.REGISTRY``, run on every
micro-batch of the streaming job (``expectations.suites.ExpectationsObserver``)."""
