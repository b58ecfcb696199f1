"""Which cert-manager Certificates VirtualServers ask for, and what to write.

As NIC's cert-manager controller: one Certificate per VirtualServer asking,
named after and writing ``tls.secret``, in its namespace, for its host, issued
by the issuer named, labelled as the VirtualServer and controlled by it (an
ownerReference: deleting the VirtualServer deletes it). A Certificate of that
name not controlled by the VirtualServer is left alone (someone else's). Unlike
NIC, a Certificate the VirtualServer no longer asks for (its cert-manager
field or secret changed) is deleted too, not only when it asks for another.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.cert_manager import DEFAULT_USAGES, CertManager

API_VERSION = "cert-manager.io/v1"
# NIC's Event reasons.
CREATED, UPDATED, DELETED, BAD_CONFIG = (
    "CreateCertificate",
    "UpdateCertificate",
    "DeleteCertificate",
    "BadConfig",
)


@dataclass(frozen=True)
class Wanted:
    """What one VirtualServer asks for."""

    namespace: str
    name: str  # the VirtualServer's
    uid: str
    labels: tuple[tuple[str, str], ...]
    host: str
    secret: str
    cm: CertManager


def certificate(w: Wanted) -> dict[str, Any]:
    """The Certificate ``w`` asks for, as written (server-side apply's body)."""
    spec: dict[str, Any] = {
        "dnsNames": [w.host],
        "secretName": w.secret,
        "issuerRef": {"name": w.cm.issuer, "kind": w.cm.issuer_kind, "group": w.cm.issuer_group},
        "usages": list(w.cm.usages or DEFAULT_USAGES),
    }
    if w.cm.common_name:
        spec["commonName"] = w.cm.common_name
    if w.cm.duration:
        spec["duration"] = w.cm.duration
    if w.cm.renew_before:
        spec["renewBefore"] = w.cm.renew_before
    metadata: dict[str, Any] = {
        "name": w.secret,
        "namespace": w.namespace,
        "labels": dict(w.labels),
        "ownerReferences": [
            {
                "apiVersion": "k8s.nginx.org/v1",
                "kind": "VirtualServer",
                "name": w.name,
                "uid": w.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if w.cm.issue_temp_cert:
        metadata["annotations"] = {"cert-manager.io/issue-temporary-certificate": "true"}
    return {"apiVersion": API_VERSION, "kind": "Certificate", "metadata": metadata, "spec": spec}


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the VirtualServer controlling a Certificate, None: none does."""
    md = obj.get("metadata") or {}
    for ref in md.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "VirtualServer":
            return str(ref.get("uid", ""))
    return None


def _differs(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    md_have, md_want = have.get("metadata") or {}, want["metadata"]
    if (md_have.get("labels") or {}) != md_want["labels"]:
        return True
    if (md_have.get("annotations") or {}).get("cert-manager.io/issue-temporary-certificate") != (
        md_want.get("annotations") or {}
    ).get("cert-manager.io/issue-temporary-certificate"):
        return True
    spec = have.get("spec") or {}
    return any(spec.get(k) != v for k, v in want["spec"].items()) or any(
        k in spec for k in ("commonName", "duration", "renewBefore") if k not in want["spec"]
    )


@dataclass(frozen=True)
class Action:
    verb: str  # "create", "update", "delete" or "foreign" (someone else's: left alone)
    namespace: str
    name: str  # the Certificate's
    vs: str  # the VirtualServer's name (its Event)
    body: Mapping[str, Any] | None = None


def plan(
    wanted: Iterable[Wanted], existing: Iterable[Mapping[str, Any]], served: Mapping[str, str]
) -> list[Action]:
    """What to write so that the Certificates are those ``wanted``; ``served``:
    the uid -> name of every VirtualServer ferryman serves (a Certificate one of
    them controls but no longer asks for is deleted; another controller's
    VirtualServers' are not ferryman's to touch)."""
    by_key = {(w.namespace, w.secret): w for w in wanted}
    have: dict[tuple[str, str], Mapping[str, Any]] = {}
    for obj in existing:
        md = obj.get("metadata") or {}
        have[(str(md.get("namespace", "")), str(md.get("name", "")))] = obj
    out: list[Action] = []
    for key, w in sorted(by_key.items()):
        body = certificate(w)
        current = have.get(key)
        if current is None:
            out.append(Action("create", *key, w.name, body))
        elif controller_uid(current) != w.uid:
            out.append(Action("foreign", *key, w.name))
        elif _differs(current, body):
            out.append(Action("update", *key, w.name, body))
    for key, obj in sorted(have.items()):
        uid = controller_uid(obj)
        if uid is None or uid not in served:
            continue
        asked = by_key.get(key)
        if asked is None or asked.uid != uid:
            out.append(Action("delete", *key, served[uid]))
    return out
