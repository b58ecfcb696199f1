"""Whether a pod being created gets ferryman's readiness gate, as an AdmissionReview.

Only two things are read: the pod in the request, and the Services that a served
Ingress routes to, from the controller's cache (``services``). Nothing in the
request becomes configuration, and no Ingress or Service is taken from it: the
request is written by whoever creates the pod, the cache by the API server's
watch (CVE-2025-1974: ingress-nginx's admission webhook turned the Ingress it was
sent into NGINX configuration and ran ``nginx -t`` on it).

The answer always allows the pod: a gate is an addition, never a reason to refuse
a pod, and an error here must cost at most the gate, never the pod.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources import readiness_gate
from ferryman.resources.meta import InvalidResource
from ferryman.resources.service import Service, parse_service

log = logging.getLogger("ferryman.webhook")

# A pod labelled so is never gated (the same key as the namespace's opt-in).
# ferryman's own pod templates carry it: the webhook's configuration skips them
# by an objectSelector, and the decision again here. Were ferryman's pods gated,
# a ferryman Service routed by an Ingress would wait on itself to become ready.
OPT_OUT = "disabled"

# Results, the label of ferryman_readiness_gate_webhook_reviews_total.
INJECTED = "injected"  # the answer adds the gate
UNCHANGED = "unchanged"  # answered without a patch: not for this pod, or already there
ERROR = "error"  # the review could not be read; answered without a patch, or 400

API_VERSION = "admission.k8s.io/v1"


@dataclass(frozen=True)
class Outcome:
    """The AdmissionReview to answer with (None: the request had no uid to
    answer, so HTTP 400), the result counted, and why (for the log)."""

    review: dict[str, Any] | None
    result: str
    reason: str


class Injector:
    def __init__(
        self,
        ingress_class: str,
        services: Callable[[str], Iterable[Service]],
        namespace_opted_in: Callable[[str], bool | None] | None = None,
    ) -> None:
        """``services(namespace)``: the Services there that a served Ingress routes
        to, from the cache. ``namespace_opted_in(namespace)``: whether the namespace
        carries the opt-in label, when the caller knows its labels; None (or no
        callable) trusts the webhook configuration's namespaceSelector, which made
        the API server call at all."""
        self._gate = readiness_gate.gate_type(ingress_class)
        self._services = services
        self._opted_in = namespace_opted_in

    def review(self, document: object) -> Outcome:
        request = document.get("request") if isinstance(document, Mapping) else None
        uid = request.get("uid") if isinstance(request, Mapping) else None
        if not isinstance(uid, str) or not uid:
            return Outcome(None, ERROR, "not an AdmissionReview with a request uid")
        assert isinstance(request, Mapping)
        response: dict[str, Any] = {"uid": uid, "allowed": True}
        try:
            patch, reason = self._patch(request)
        except Exception as e:  # a bug must cost the gate, never the pod
            log.exception("readiness gate webhook failed on a review")
            patch, reason = None, f"internal error: {type(e).__name__}"
            result = ERROR
        else:
            result = INJECTED if patch else UNCHANGED
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        review = {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
        return Outcome(review, result, reason)

    def _patch(self, request: Mapping[str, Any]) -> tuple[list[dict[str, Any]] | None, str]:
        """The JSONPatch for the request's pod (None: none), and why."""
        kind = request.get("kind")
        if not (
            isinstance(kind, Mapping)
            and kind.get("group", "") == ""
            and kind.get("kind") == "Pod"
            and request.get("operation") == "CREATE"
            and not request.get("subResource")
        ):
            return None, "not a pod's creation"
        pod = request.get("object")
        # At CREATE a pod may have only generateName, and its namespace only in
        # the request (the API server fills metadata.namespace after admission).
        namespace = request.get("namespace")
        if not isinstance(pod, Mapping) or not isinstance(namespace, str) or not namespace:
            return None, "no pod or namespace in the request"
        if self._opted_in is not None and self._opted_in(namespace) is False:
            return None, "namespace not opted in"
        md = pod.get("metadata")
        labels = md.get("labels") if isinstance(md, Mapping) else None
        if not isinstance(labels, Mapping):
            labels = {}
        if labels.get(readiness_gate.INJECT_LABEL) == OPT_OUT:
            return None, "pod opted out"
        spec = pod.get("spec")
        if not isinstance(spec, Mapping):
            return None, "pod without spec"
        gates = spec.get("readinessGates")
        if gates is not None and not isinstance(gates, list):
            return None, "spec.readinessGates is not a list"
        present = (g.get("conditionType") for g in gates or [] if isinstance(g, Mapping))
        if self._gate in present:
            return None, "gate already present"
        if not readiness_gate.gated_by(self._services(namespace), labels):
            return None, "no served Service selects the pod"
        gate = {"conditionType": self._gate}
        if not gates:  # absent or empty: "add" sets (or replaces) the member
            return [{"op": "add", "path": "/spec/readinessGates", "value": [gate]}], "injected"
        return [{"op": "add", "path": "/spec/readinessGates/-", "value": gate}], "injected"


class CachedServices:
    """``Injector``'s ``services``, from the controller's cache.

    ``served(namespace)`` names the Services a served Ingress routes to
    (``Controller.served_services``); ``get(kind, namespace, name)`` and
    ``stamp(kind, namespace, name)`` read the store. Parsed Services are kept
    and re-read only when their stamp changes: reading and parsing every served
    Service per pod took 19 ms with 1,000 in a namespace, and the webhook answers
    on the event loop the controller runs on. A Service the store lacks or
    cannot parse selects nothing.
    """

    def __init__(
        self,
        served: Callable[[str], Iterable[str]],
        get: Callable[[str, str, str], Mapping[str, Any] | None],
        stamp: Callable[[str, str, str], object | None],
    ) -> None:
        self._served = served
        self._get = get
        self._stamp = stamp
        # namespace -> name -> (stamp, parsed); only what is served, per namespace.
        self._parsed: dict[str, dict[str, tuple[object, Service | None]]] = {}

    def __call__(self, namespace: str) -> list[Service]:
        known = self._parsed.get(namespace, {})
        now: dict[str, tuple[object, Service | None]] = {}
        for name in self._served(namespace):
            stamp = self._stamp("Service", namespace, name)
            if stamp is None:
                continue
            kept = known.get(name)
            now[name] = (
                kept
                if kept is not None and kept[0] is stamp
                else (stamp, self._parse(namespace, name))
            )
        if now:
            self._parsed[namespace] = now
        else:
            self._parsed.pop(namespace, None)
        return [service for _, service in now.values() if service is not None]

    def _parse(self, namespace: str, name: str) -> Service | None:
        raw = self._get("Service", namespace, name)
        if raw is None:
            return None
        try:
            return parse_service(raw)
        except InvalidResource:
            return None
