"""A Gateway's ``spec.tls.frontend``: client certificate validation of its
HTTPS listeners (gateway-api v1.6 apis/v1 gateway_types.go, FrontendTLSConfig;
the GatewayFrontendClientCertificateValidation features), checked as the CRD
checks it.

``default`` applies to every HTTPS listener, unless ``perPort`` names the
listener's port: then that port's ``tls`` applies instead (an entry without
``validation`` turns validation off on that port). A validation names 1 to 16
``caCertificateRefs`` (object references: group and kind required) and a
``mode``, ``AllowValidOnly`` (the default) or ``AllowInsecureFallback``.
Whether the references resolve is the listener's status
(records/frontend_tls.py), not a parse error.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.kinds.gateway.parse.fields import ObjectReference, parse_reference
from ferryman.resources.nic_fields import Obj, duplicate, invalid, required

ALLOW_VALID_ONLY = "AllowValidOnly"
ALLOW_INSECURE_FALLBACK = "AllowInsecureFallback"
MODES = (ALLOW_VALID_ONLY, ALLOW_INSECURE_FALLBACK)
MAX_REFS = 16
MAX_PER_PORT = 64

_TLS_KEYS = frozenset({"validation"})
_VALIDATION_KEYS = frozenset({"caCertificateRefs", "mode"})
_REF_KEYS = frozenset({"group", "kind", "name", "namespace"})


@dataclass(frozen=True)
class FrontendValidation:
    refs: tuple[ObjectReference, ...]
    mode: str  # ALLOW_VALID_ONLY | ALLOW_INSECURE_FALLBACK

    @property
    def insecure(self) -> bool:
        return self.mode == ALLOW_INSECURE_FALLBACK


@dataclass(frozen=True)
class FrontendTLS:
    default: FrontendValidation | None
    # port -> that port's validation (None: none there), in the spec's order.
    per_port: tuple[tuple[int, FrontendValidation | None], ...] = ()

    def for_port(self, port: int) -> FrontendValidation | None:
        """The validation of the HTTPS listeners on ``port``."""
        for p, validation in self.per_port:
            if p == port:
                return validation
        return self.default

    @property
    def insecure(self) -> bool:
        """Some port's validation is AllowInsecureFallback (the Gateway's
        ``InsecureFrontendValidationMode`` condition)."""
        every = [self.default, *(v for _, v in self.per_port)]
        return any(v is not None and v.insecure for v in every)


def parse_frontend(tls: Obj | None) -> FrontendTLS | None:
    """``spec.tls`` (None: absent) -> its ``frontend`` (None: absent)."""
    frontend = tls.obj("frontend", frozenset({"default", "perPort"})) if tls else None
    if frontend is None:
        return None
    ctx = frontend.ctx
    default_obj = frontend.obj("default", _TLS_KEYS)
    if default_obj is None:
        ctx.add(required(frontend.at("default")))
    default = _tls_config(default_obj)
    per_port: list[tuple[int, FrontendValidation | None]] = []
    entries = frontend.objs("perPort", frozenset({"port", "tls"}))
    if len(entries) > MAX_PER_PORT:
        too_many = f"must have at most {MAX_PER_PORT} items"
        ctx.add(invalid(frontend.at("perPort"), len(entries), too_many))
    seen: set[int] = set()
    for entry in entries:
        port = entry.integer("port")
        if port is None or not 1 <= port <= 65535:
            ctx.add(invalid(entry.at("port"), port, "must be between 1 and 65535, inclusive"))
            continue
        if port in seen:
            ctx.add(duplicate(entry.at("port"), port))
        seen.add(port)
        tls_obj = entry.obj("tls", _TLS_KEYS)
        if tls_obj is None:
            ctx.add(required(entry.at("tls")))
        per_port.append((port, _tls_config(tls_obj)))
    return FrontendTLS(default, tuple(per_port))


def _tls_config(o: Obj | None) -> FrontendValidation | None:
    v = o.obj("validation", _VALIDATION_KEYS) if o else None
    if v is None:
        return None
    ctx = v.ctx
    refs = []
    for r in v.objs("caCertificateRefs", _REF_KEYS):
        for key in ("group", "kind", "name"):
            if not r.has(key):
                ctx.add(required(r.at(key)))
        refs.append(parse_reference(r, "ConfigMap"))
    if not refs:
        ctx.add(required(v.at("caCertificateRefs"), "must have at least 1 item"))
    elif len(refs) > MAX_REFS:
        too_many = f"must have at most {MAX_REFS} items"
        ctx.add(invalid(v.at("caCertificateRefs"), len(refs), too_many))
    mode = v.text("mode") if v.has("mode") else ALLOW_VALID_ONLY
    if mode not in MODES:
        supported = 'supported values: "AllowValidOnly", "AllowInsecureFallback"'
        ctx.add(invalid(v.at("mode"), mode, supported))
    return FrontendValidation(tuple(refs), mode)
