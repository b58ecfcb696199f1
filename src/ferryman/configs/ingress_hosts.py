"""Which records an Ingress's hosts become, by what its annotations ask for.

- nothing beyond the fast path's (paths, TLS, ssl-redirect, round-robin or
  least_conn, max-fails, fail-timeout): the ``H`` record alone, routed by the
  C module;
- ``nginx.org/policies`` only: the stub ``H`` and the ``I`` V record
  (``ingress_policies``);
- any other option (``ingress_options``) or basic auth: the stub ``H`` and a
  VirtualServer-style V record (``ingress_vs``), with the policies in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ferryman.configs.ingress_options import ingress_options
from ferryman.configs.ingress_policies import ingress_policies, ingress_routing
from ferryman.configs.ingress_vs import basic_auth, combined, ingress_vs_routing
from ferryman.configs.model import CATCH_ALL, VirtualHost
from ferryman.configs.policy_reads import PolicyReads
from ferryman.configs.vs_policies import NONE
from ferryman.resources.ingress import Ingress


@dataclass(frozen=True)
class Written:
    host: VirtualHost  # the H record's
    routing: str | None  # the V record, None: none


def ingress_records(
    ing: Ingress,
    vhosts: list[VirtualHost],
    reads: PolicyReads,
    ingress_class: str,
    configmap: Mapping[str, str],
    *,
    slow_path: bool = True,
) -> tuple[list[Written], list[str]]:
    """The records of ``vhosts`` (``ingress.virtual_hosts``) and the warnings;
    ``slow_path``: the data plane has the Lua slow path (not Angie's)."""
    if not vhosts:
        return [], []
    options, warnings = ingress_options(ing.meta.annotations, configmap)
    auth = basic_auth(ing, options, reads) if slow_path else NONE
    if not slow_path and (options.slow() or options.basic_auth_secret):
        warnings.append(
            "nginx.org annotations beyond lb-method, max-fails, fail-timeout and "
            "ssl-redirect are applied by the nginx data plane only (ferryman); ignored"
        )
        return [Written(vh, None) for vh in vhosts], warnings
    if not options.slow() and auth is NONE:
        if not ing.policies:
            return [Written(vh, None) for vh in vhosts], warnings
        guarded = ingress_policies(ing, reads, ingress_class)
        written = [Written(*ingress_routing(vh, guarded)) for vh in vhosts]
        return written, [*warnings, *guarded.warnings]
    policies = ingress_policies(ing, reads, ingress_class) if ing.policies else NONE
    attached = combined(policies, auth)
    warnings += attached.warnings
    out = []
    for vh in vhosts:
        host = "" if vh.host == CATCH_ALL else vh.host
        stub, record, _ = ingress_vs_routing(ing, vh, host, options, attached)
        out.append(Written(stub, record))
    return out, warnings
