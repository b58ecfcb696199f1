"""Raw objects as the store keeps them: only what the parsers read, packed.

A raw object from the API carries much that ferryman never reads
(``managedFields``, ``status``, an Endpoint's ``targetRef`` but for its pod's
name, ``zone`` and ``hints``, kubectl's ``last-applied-configuration``, a Service's cluster
IPs), and a tree of small dicts costs ~185 bytes per dict: at 10,000
Ingresses the raw objects were two thirds of the controller's memory.

``slim`` projects an object onto the fields the parsers of its kind read; the
parse of the slim object equals the parse of the full one (the
last-applied-configuration annotation aside, which nothing reads), errors
included: a map that would make the parser fail is kept whole. ``pack`` then
keeps it as one ``marshal`` string (a few hundred bytes), unpacked afresh
whenever it is read.
"""

from __future__ import annotations

import marshal
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ferryman.engine.kind_spec import KindSpec
from ferryman.resources.service import SERVICE_NAME_LABEL

# A copy of the whole object as kubectl applied it: never read, often the
# largest field of a hand-applied object.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# What parse_meta reads; the rest of metadata (managedFields, ownerReferences,
# finalizers, ...) is dropped.
_META_KEYS = (
    "name", "namespace", "creationTimestamp", "uid", "resourceVersion", "generation",
    "annotations", "labels",
)  # fmt: skip
# Labels and annotations the engine's own kinds' parsers look up; None: the
# whole map (its parse result holds it). Any other kind keeps both whole.
_LABELS_READ: dict[str, tuple[str, ...] | None] = {
    "Service": (),
    "EndpointSlice": (sys.intern(SERVICE_NAME_LABEL),),
    "Secret": (),
    "Pod": None,  # matched against Service selectors
    # Readiness gates read the opt-in label; Gateway API's allowedRoutes
    # namespace selectors any label.
    "Namespace": None,
}
_ANNOTATIONS_READ: dict[str, tuple[str, ...] | None] = {
    "Service": (),
    "EndpointSlice": (),
    "Secret": (),
    "Pod": (),
    "Namespace": (),
}
# The keys above and these are written into slim objects: interned, as the
# strings of a ``compacted`` object are (names made of letters only are anyway).
# A TLS Secret keeps its pair and its ca.crt: ingress-nginx's proxy-ssl-secret
# verifies the backend against it (a few KB, where cert-manager writes one).
_SECRET_KEYS = (sys.intern("tls.crt"), sys.intern("tls.key"), sys.intern("ca.crt"))
# Strings up to this long are interned: namespaces, kinds, label keys, Service
# names, port names and paths repeat across objects; a certificate does not.
# The parsed objects the controller keeps then share them (interning only the
# fields that obviously repeat measured 4 MB more at 10,000 Ingresses).
INTERN_MAX = 64


def compact(value: Any) -> Any:
    """A copy with dict keys and short strings interned (``INTERN_MAX``)."""
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= INTERN_MAX and type(value) is str else value
    if isinstance(value, dict):
        return {compact(k): compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    return value


def _strings_only(value: object) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _str_map(value: object, read: tuple[str, ...] | None, drop: str | None = None) -> object:
    """Labels or annotations, keeping the keys in ``read`` (all when None).

    A map the parser would refuse stays whole, so the parse fails the same way."""
    if not _strings_only(value):
        return value
    assert isinstance(value, Mapping)
    if read is None:
        return {k: v for k, v in value.items() if k != drop}
    return {k: value[k] for k in read if k in value}


def _metadata(md: object, kind: str) -> object:
    if not isinstance(md, Mapping):
        return md
    out = {k: md[k] for k in _META_KEYS if k in md}
    if kind == "Pod" and "deletionTimestamp" in md:  # a terminating pod is not routed
        out["deletionTimestamp"] = md["deletionTimestamp"]
    if "labels" in out:
        out["labels"] = _str_map(out["labels"], _LABELS_READ.get(kind))
    if "annotations" in out:
        out["annotations"] = _str_map(
            out["annotations"], _ANNOTATIONS_READ.get(kind), drop=LAST_APPLIED
        )
    return out


def _ports(ports: object, read: tuple[str, ...] = ("name", "port")) -> object:
    """A port list: the fields of each entry that are read (name and number;
    a Service's appProtocol too, which Gateway API's backends honour)."""
    if not isinstance(ports, list):
        return ports
    return [{k: p[k] for k in read if k in p} if isinstance(p, Mapping) else p for p in ports]


_CONDITIONS = ("ready", "serving", "terminating")


def _endpoint(e: object) -> object:
    if not isinstance(e, Mapping):
        return e
    out = {k: e[k] for k in ("addresses", "conditions", "nodeName") if k in e}
    cond = out.get("conditions")
    if isinstance(cond, Mapping):
        # ready, serving and terminating choose the peers (configs/endpoints.py).
        out["conditions"] = {k: cond[k] for k in _CONDITIONS if k in cond}
    ref = e.get("targetRef")
    if isinstance(ref, Mapping) and ref.get("kind") == "Pod":
        # The pod's name (the latency histogram's pod_name label), ~32 bytes an
        # endpoint; its namespace, uid and resourceVersion are not read.
        out["targetRef"] = {k: ref[k] for k in ("kind", "name") if k in ref}
    return out


_POD_CONDITION_KEYS = ("type", "status", "lastTransitionTime", "reason", "message")


def _pod_spec(spec: object) -> object:
    if not isinstance(spec, Mapping):
        return spec
    return {"readinessGates": spec["readinessGates"]} if "readinessGates" in spec else {}


def _pod_status(status: object) -> object:
    """Addresses and conditions; the rest (container statuses, above all) is dropped."""
    if not isinstance(status, Mapping):
        return status
    out = {k: status[k] for k in ("podIP", "podIPs") if k in status}
    cond = status.get("conditions")
    if isinstance(cond, list):
        out["conditions"] = [
            {k: c[k] for k in _POD_CONDITION_KEYS if k in c} if isinstance(c, Mapping) else c
            for c in cond
        ]
    elif "conditions" in status:
        out["conditions"] = cond
    return out


def _data(data: object, secret_type: object) -> object:
    """A TLS Secret's pair and CAs; everything a policy's Secret (nginx.org/...) holds."""
    if not isinstance(data, Mapping):
        return data
    if isinstance(secret_type, str) and secret_type.startswith("nginx.org/"):
        return dict(data)
    return {k: data[k] for k in _SECRET_KEYS if k in data}


def slim(
    obj: Mapping[str, Any],
    *,
    compacted: bool = False,
    kinds: Mapping[str, KindSpec] | None = None,
) -> dict[str, Any]:
    """``obj`` without the fields its kind's parser never reads: the engine's
    own kinds field by field, one of ``kinds`` (the registered ones) by its
    spec's ``keeps``, any other whole; ``compacted``: ``obj`` is a tree of its
    own whose strings are interned as ``compact`` does (the manifests loader
    builds it so), which is then not walked again."""
    kind = obj.get("kind")
    spec = kinds.get(kind) if kinds is not None and isinstance(kind, str) else None
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    if "metadata" in obj:
        out["metadata"] = _metadata(obj["metadata"], kind if isinstance(kind, str) else "")
    if spec is not None and spec.keeps is not None:
        for k in (*spec.keeps, *spec.reported):
            if k in obj:
                out[k] = obj[k]
    elif kind == "Service":
        spec = obj.get("spec")
        if isinstance(spec, Mapping):
            ports = _ports(spec.get("ports"), ("name", "port", "appProtocol"))
            out["spec"] = {"ports": ports} if "ports" in spec else {}
            if "selector" in spec:  # which pods get a readiness gate
                out["spec"]["selector"] = spec["selector"]
            for k in ("clusterIP", "type"):  # nginx.org/use-cluster-ip
                if k in spec:
                    out["spec"][k] = spec[k]
        elif "spec" in obj:
            out["spec"] = spec
    elif kind == "EndpointSlice":
        for k in ("addressType", "ports", "endpoints"):
            if k in obj:
                out[k] = obj[k]
        if "ports" in out:
            out["ports"] = _ports(out["ports"])
        if isinstance(out.get("endpoints"), list):
            out["endpoints"] = [_endpoint(e) for e in out["endpoints"]]
    elif kind == "Secret":
        for k in ("type", "data", "stringData"):
            if k in obj:
                out[k] = _data(obj[k], obj.get("type")) if k != "type" else obj[k]
    elif kind == "Pod":
        if "spec" in obj:
            out["spec"] = _pod_spec(obj["spec"])
        if "status" in obj:
            out["status"] = _pod_status(obj["status"])
    elif kind == "Namespace":
        pass  # its name and labels (opt-in, route selectors) are all that is read
    else:  # a kind no parser reads: kept as it is
        out = dict(obj)
    if compacted:
        return out
    copy: dict[str, Any] = compact(out)
    return copy


class Packed(Mapping[str, Any]):
    """A raw object kept as one marshal string; reading it unpacks a fresh copy.

    An object marshal cannot write (a type YAML or a client made that the API
    never sends) is kept as it is."""

    __slots__ = ("_data", "_obj")

    def __init__(self, obj: dict[str, Any]) -> None:
        try:
            self._data: bytes | None = marshal.dumps(obj)
            self._obj: dict[str, Any] | None = None
        except ValueError:
            self._data, self._obj = None, obj

    @classmethod
    def of(cls, data: bytes) -> Packed:
        """The object ``data`` (what ``data`` of a Packed was) stands for."""
        packed = cls.__new__(cls)
        packed._data, packed._obj = data, None
        return packed

    @property
    def data(self) -> bytes | None:
        """The marshal string; None for an object kept as it is."""
        return self._data

    def unpack(self) -> dict[str, Any]:
        if self._data is None:
            assert self._obj is not None
            return dict(self._obj)
        obj: dict[str, Any] = marshal.loads(self._data)
        return obj

    def __getitem__(self, key: str) -> Any:
        return self.unpack()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.unpack())

    def __len__(self) -> int:
        return len(self.unpack())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Packed):
            if self._data is not None and self._data == other._data:
                return True
            return self.unpack() == other.unpack()
        return isinstance(other, Mapping) and self.unpack() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Packed({self.unpack()!r})"


def pack(
    obj: Mapping[str, Any],
    *,
    compacted: bool = False,
    kinds: Mapping[str, KindSpec] | None = None,
) -> Packed:
    """``obj`` slimmed and packed, as the store keeps it (see ``slim``)."""
    if isinstance(obj, Packed):
        return obj
    return Packed(slim(obj, compacted=compacted, kinds=kinds))
