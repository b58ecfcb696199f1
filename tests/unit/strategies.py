"""Hypothesis strategies more than one test module draws from."""

from __future__ import annotations

from hypothesis import strategies as st

# A DNS label as Kubernetes names namespaces, Services and port names.
dns_labels = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)

# "namespace/service:port", the port by number or by name (configs.model.backend_key).
backend_keys = st.builds(
    lambda ns, svc, port: f"{ns}/{svc}:{port}",
    dns_labels,
    dns_labels,
    st.one_of(st.integers(1, 65535).map(str), dns_labels),
)
