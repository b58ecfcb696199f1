"""ferryman as a Machine deletion lifecycle hook owner (``--machine-lifecycle-hooks``).

``decide`` is the pure part (which hooks a Machine should carry, when a drain is
done); ``replica`` is every replica's part (the Machines it watches, its Node's
endpoints and readiness, its report of requests in flight); ``keeper`` is the
leader's (hook patches, Events, metrics).
"""
