"""Policies on an Ingress (NIC's ``nginx.org/policies`` annotation), with no reload.

NIC attaches them at server level for every host of the Ingress (its
``specContext``) and allows only some kinds there (``IsPolicySupportedOnIngress``:
accessControl, cors, externalAuth, ingressMTLS, egressMTLS, waf). A Policy of
any other kind, or one missing or invalid, makes every request of the
Ingress's hosts answer 500 (NIC's server-level ``return 500``) and the Ingress
``Warning`` with NIC's message; the first such reference ends the list.

The module routes Ingress hosts from their H record and cannot enforce
policies, so a host with policies is written as a stub H record (no route, no
default backend: every request goes to the Lua slow path, as a
VirtualServer's) and a ``V`` record only Lua reads:

``I <matched> <unmatched> <default> <item> ...`` (fields split by one space):
``<matched>``, the P items (``vs_policies``) a request matching a path
enforces, ``<unmatched>`` those of one no path matches (NIC writes CORS
headers into locations only), ``,``-separated, ``!`` to answer 500, ``-`` for
none; ``<default>`` the defaultBackend or ``-``; items ``E|<path>|<backend>``
(Exact), ``L|<path>|<backend>`` (Prefix) and ``P|<letter>|<fields>`` (policy
configurations, numbered from 1 in order). ``dataplane/lua/ferryman_ingress.lua``
decodes it; the paths match as ``routes.match`` says.
"""

from __future__ import annotations

from dataclasses import replace

from ferryman.configs.model import BackendKey, VirtualHost
from ferryman.configs.routes import NO_BACKEND, route_tables
from ferryman.kinds.ingress.parse.ingress import Ingress
from ferryman.kinds.policy.parse.cors import CORS
from ferryman.kinds.policy.parse.external_auth import ExternalAuth
from ferryman.kinds.policy.parse.policy import AccessControl, EgressMTLS, IngressMTLS, Policy
from ferryman.kinds.policy.records.attach import Attached, PolicyItems, attach
from ferryman.kinds.policy.records.base import SPEC, Enforced, Owner
from ferryman.kinds.policy.records.ingress_mtls import ClientCerts
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.kinds.policy.records.registry import TRANSLATORS
from ferryman.resources.meta import Meta

# NIC's allowlist (waf: rejected when the Policy is read, so missing or invalid here).
ON_INGRESS = (AccessControl, CORS, IngressMTLS, EgressMTLS, ExternalAuth)
# Of those, the kinds ferryman does not enforce on Ingress yet (they fail
# closed: 500, Warning). None now: ingressMTLS is the host's M record
# (``client_check``), externalAuth's Service is among the record's backends,
# egressMTLS sets the client certificate of ``nginx.org/ssl-services``'
# upstreams (on plain HTTP ones it does nothing, as NGINX's proxy_ssl_* in NIC).
NOT_YET_ON_INGRESS: tuple[type, ...] = ()


def ingress_policies(ing: Ingress, reads: PolicyReads, ingress_class: str) -> Attached:
    """NIC's generatePolicies for an Ingress: each reference in order, the first
    missing, invalid or not allowed on Ingress failing every host."""
    owner = Owner(
        namespace=ing.meta.namespace,
        name=ing.meta.name,
        vs_namespace=ing.meta.namespace,
        vs_name=ing.meta.name,
        context=SPEC,
        tls=bool(ing.tls),
        ingress_class=ingress_class,
        kind="Ingress",
    )
    refs = list(ing.policies)
    for i, ref in enumerate(refs):
        policy = reads.policy(ref.namespace, ref.name)
        if policy is None or policy.ingress_class not in ("", ingress_class):
            break  # attach says so, in NIC's words
        key = f"{ref.namespace}/{ref.name}"
        if not isinstance(policy.policy, ON_INGRESS):
            message = f"Policy {key} is not supported on Ingress resources"
        elif isinstance(policy.policy, NOT_YET_ON_INGRESS):
            kind = type(policy.policy).__name__
            message = f"Policy {key}: {kind} on Ingress resources is not enforced yet (ferryman)"
        elif isinstance(policy.policy, IngressMTLS) and ing.mergeable == "minion":
            # NIC sets a minion's ingressMTLS on a server the master's replaces.
            message = (
                f"Policy {key}: IngressMTLS on a mergeable minion is not enforced "
                "(client certificates are the master's host's); set it on the master"
            )
        else:
            continue
        before = attach(refs[:i], owner, reads)
        if before.error:
            return before
        return Attached({}, (*before.warnings, message), True)
    return attach(refs, owner, reads)


def annotation_policies(ing: Ingress, reads: PolicyReads) -> Attached:
    """ingress-nginx's access annotations (``Ingress.annotation_policies``) as the
    Policies that say the same would be enforced on the Ingress's routes: each by
    its kind's translator, named after the Ingress in their messages."""
    ns, name = ing.meta.namespace, ing.meta.name
    owner = Owner(ns, name, ns, name, SPEC, tls=bool(ing.tls), kind="Ingress")
    configs: dict[type[Enforced], Enforced] = {}
    warnings: list[str] = []
    for model in ing.annotation_policies:
        kind, translate = TRANSLATORS[type(model)]
        policy = Policy(Meta(name, ns), "", model)
        step = translate(policy, f"(annotations of Ingress {ns}/{name})", None, owner, reads)
        warnings += step.warnings
        if step.error:
            return Attached({}, tuple(warnings), True)
        if step.config is not None:
            configs[kind] = step.config
    return Attached(configs, tuple(warnings))


def client_check(attached: Attached) -> str | None:
    """The host's M record (ingressMTLS), None: no client certificates asked for."""
    client = attached.configs.get(ClientCerts)
    return client.record() if isinstance(client, ClientCerts) and not attached.error else None


def ingress_routing(
    vh: VirtualHost, attached: Attached
) -> tuple[VirtualHost, str, frozenset[BackendKey]]:
    """The stub H record's host, the V record for a host with policies and the
    Services the policies proxy to (externalAuth's)."""
    items = PolicyItems()
    matched = items.reference(attached) or "-"
    unmatched = items.reference(attached, route_only=frozenset("c")) or "-"
    exact, prefix = route_tables(vh.routes)
    fields = ["I", matched, unmatched, vh.default_backend or NO_BACKEND]
    fields += [f"E|{p}|{b}" for p, b in sorted(exact.items())]
    fields += [f"L|{p}|{b}" for p, b in sorted(prefix.items())]
    fields += items.items
    extra = frozenset(BackendKey(k) for k in items.backends)
    return replace(vh, routes=(), default_backend=None), " ".join(fields), extra
