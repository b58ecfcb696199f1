"""engine: the control loop that names no kind. The store and the sink the sources
fill, the work queue and its keys, the worker (``controller``) that runs the
registered kinds' translators and pushes their records and files, the endpoint sets,
what a translation may read (``reads``, ``secrets``), host ownership
(``configuration``), who depends on whom (``dependencies``), readiness as caught up
(``following``); and the vocabulary the kinds share with it (``settings``,
``kind_spec``, ``queue_keys``): pure modules the kinds' parsers may import where the
rest of the engine is forbidden to them (pyproject.toml's import-linter contracts)."""
