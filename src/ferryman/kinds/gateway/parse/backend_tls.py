"""gateway.networking.k8s.io/v1 BackendTLSPolicy: a typed view with the
standard channel's validation (v1.6's CRD and its CEL rules).

A BackendTLSPolicy says how the Gateway speaks TLS to a Service (or one of
its ports, by name: ``sectionName``): the CAs it verifies the backend with
(ConfigMaps holding ``ca.crt``, or ``wellKnownCACertificates: System``), the
name it sends as SNI and verifies (``hostname``), and, when given, the
subject alternative names one of which the certificate must hold instead
(``subjectAltNames``, Hostname or URI). What the parse cannot know (whether a
ConfigMap exists and holds a certificate, which Gateways the Service is
reached from, which older policy takes the same target) is the status's
(``records/backend_tls.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import Context, Obj, Parsed, invalid, parse_object_meta, required

# The CRD's patterns (gateway-api v1.6 apis/v1/backendtlspolicy_types.go).
_HOSTNAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SAN_HOSTNAME_RE = re.compile(
    r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_WELL_KNOWN_RE = re.compile(
    r"^(System|([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    r"/([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]))$"
)
_SECTION_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# An absolute URI (RFC 3986's scheme, then anything printable): the CRD's
# AbsoluteURI; whitespace and control characters never reach a record.
_URI_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:[\x21-\x7e]+$")
_KIND_RE = re.compile(r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")
_GROUP_RE = re.compile(r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# The key of a ConfigMap's CA certificates (the specification's).
CA_KEY = "ca.crt"
MAX_CA_REFS = 8
MAX_SANS = 5
MAX_TARGETS = 16


@dataclass(frozen=True)
class LocalRef:
    """A targetRef or caCertificateRef (the policy's namespace)."""

    group: str
    kind: str
    name: str
    section: str | None = None  # a targetRef's sectionName: a Service port's name


@dataclass(frozen=True)
class SubjectAltName:
    type: str  # Hostname | URI
    value: str


@dataclass(frozen=True)
class BackendTLSPolicy:
    kind: ClassVar[str] = "BackendTLSPolicy"
    meta: Meta
    targets: tuple[LocalRef, ...]
    ca_refs: tuple[LocalRef, ...]
    well_known: str | None  # "System" (or a vendor's name, not served)
    hostname: str
    sans: tuple[SubjectAltName, ...]


_SPEC_KEYS = frozenset({"targetRefs", "validation", "options"})
_VALIDATION_KEYS = frozenset(
    {"caCertificateRefs", "wellKnownCACertificates", "hostname", "subjectAltNames"}
)


def parse_backend_tls_policy(obj: Mapping[str, Any]) -> Parsed[BackendTLSPolicy]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", _SPEC_KEYS)
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    targets = tuple(
        _ref(t, "Service", section=True)
        for t in spec.objs("targetRefs", frozenset({"group", "kind", "name", "sectionName"}))
    )
    if not 1 <= len(targets) <= MAX_TARGETS:
        ctx.add(invalid("spec.targetRefs", len(targets), f"must have 1 to {MAX_TARGETS} items"))
    _check_targets(ctx, targets)
    validation = spec.obj("validation", _VALIDATION_KEYS)
    if validation is None:
        ctx.add(required("spec.validation"))
        return Parsed(None, tuple(ctx.problems))
    ref_keys = frozenset({"group", "kind", "name"})
    refs = tuple(_ref(r, "") for r in validation.objs("caCertificateRefs", ref_keys))
    if len(refs) > MAX_CA_REFS:
        ctx.add(invalid(validation.at("caCertificateRefs"), len(refs), "must have at most 8 items"))
    well_known = validation.text("wellKnownCACertificates") or None
    if well_known is not None and not _WELL_KNOWN_RE.fullmatch(well_known):
        ctx.add(invalid(validation.at("wellKnownCACertificates"), well_known, "must be System"))
    if refs and well_known:
        ctx.add(invalid("spec.validation", "", "must not contain both CACertificateRefs and "
                        "WellKnownCACertificates"))  # fmt: skip
    if not refs and not well_known:
        ctx.add(invalid("spec.validation", "", "must specify either CACertificateRefs or "
                        "WellKnownCACertificates"))  # fmt: skip
    hostname = validation.text("hostname")
    if not hostname:
        ctx.add(required(validation.at("hostname")))
    elif len(hostname) > 253 or not _HOSTNAME_RE.fullmatch(hostname):
        ctx.add(invalid(validation.at("hostname"), hostname, "must be a DNS name"))
    sans = tuple(
        _san(s) for s in validation.objs("subjectAltNames", frozenset({"type", "hostname", "uri"}))
    )
    if len(sans) > MAX_SANS:
        ctx.add(invalid(validation.at("subjectAltNames"), len(sans), "must have at most 5 items"))
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    policy = BackendTLSPolicy(meta, targets, refs, well_known, hostname, sans)
    return Parsed(policy, ())


def _ref(o: Obj, default_kind: str, section: bool = False) -> LocalRef:
    group, kind, name = o.text("group"), o.text("kind") or default_kind, o.text("name")
    if not name or len(name) > 253:
        o.ctx.add(invalid(o.at("name"), name, "must be 1 to 253 characters"))
    if len(group) > 253 or not _GROUP_RE.fullmatch(group):
        o.ctx.add(invalid(o.at("group"), group, "must be a DNS subdomain or empty"))
    if not kind or len(kind) > 63 or not _KIND_RE.fullmatch(kind):
        o.ctx.add(invalid(o.at("kind"), kind, "must be a kind name"))
    name_of_section = o.text("sectionName") or None if section else None
    if name_of_section is not None and (
        len(name_of_section) > 253 or not _SECTION_RE.fullmatch(name_of_section)
    ):
        o.ctx.add(invalid(o.at("sectionName"), name_of_section, "must be a DNS subdomain"))
    return LocalRef(group, kind, name, name_of_section)


def _check_targets(ctx: Context, targets: tuple[LocalRef, ...]) -> None:
    """The CRD's rules between targetRefs: to one object, either all name a
    section or none does, and each section once."""
    seen: dict[tuple[str, str, str], list[str | None]] = {}
    for t in targets:
        seen.setdefault((t.group, t.kind, t.name), []).append(t.section)
    for sections in seen.values():
        if len(sections) < 2:
            continue
        if None in sections:
            ctx.add(invalid("spec.targetRefs", "", "sectionName must be specified when targetRefs "
                            "includes 2 or more references to the same target"))  # fmt: skip
        elif len(set(sections)) != len(sections):
            ctx.add(invalid("spec.targetRefs", "", "sectionName must be unique when targetRefs "
                            "includes 2 or more references to the same target"))  # fmt: skip


def _san(o: Obj) -> SubjectAltName:
    kind, hostname, uri = o.text("type"), o.text("hostname"), o.text("uri")
    if kind not in ("Hostname", "URI"):
        o.ctx.add(invalid(o.at("type"), kind, "must be Hostname or URI"))
    if kind == "Hostname":
        if not hostname:
            o.ctx.add(required(o.at("hostname"), "SubjectAltName element must contain Hostname, "
                               "if Type is set to Hostname"))  # fmt: skip
        elif len(hostname) > 253 or not _SAN_HOSTNAME_RE.fullmatch(hostname):
            o.ctx.add(invalid(o.at("hostname"), hostname, "must be a DNS name"))
    elif hostname:
        o.ctx.add(invalid(o.at("hostname"), hostname, "SubjectAltName element must not contain "
                          "Hostname, if Type is not set to Hostname"))  # fmt: skip
    if kind == "URI":
        if not uri:
            o.ctx.add(required(o.at("uri"), "SubjectAltName element must contain URI, if Type "
                               "is set to URI"))  # fmt: skip
        elif len(uri) > 253 or not _URI_RE.fullmatch(uri):
            o.ctx.add(invalid(o.at("uri"), uri, "must be an absolute URI"))
    elif uri:
        o.ctx.add(invalid(o.at("uri"), uri, "SubjectAltName element must not contain URI, if "
                          "Type is not set to URI"))  # fmt: skip
    return SubjectAltName(kind, hostname if kind == "Hostname" else uri)
