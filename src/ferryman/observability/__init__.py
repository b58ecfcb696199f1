"""observability: what ferryman tells about itself and how it keeps itself quick to
start. Prometheus metrics (``metrics``), the probe and metrics server (``probes``),
request latency from NGINX's access log (``latency``), the log format (``logs``) and
the garbage collector paused through start-up (``collector``). Imported by the engine,
the data plane and the app alike; it imports none of them."""
