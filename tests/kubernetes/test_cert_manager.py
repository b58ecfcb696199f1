"""--enable-cert-manager against a real kube-apiserver: a VirtualServer's
tls.cert-manager becomes cert-manager's Certificate (NIC's shape: named after
and writing tls.secret, for the host, controlled by the VirtualServer), follows
its edits, is deleted when no longer asked for, and a Certificate someone
else owns is left alone; once the Secret is issued the host serves TLS, no
reload."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.events_v1 import Event
from lightkube.types import PatchType

from testkit.apiserver import apply, wait_until
from testkit.cert_manager import CRD
from testkit.harness import Ferryman, service_with_backends, tls_secret
from testkit.netns import BackendHost
from testkit.nic_resources import VirtualServer

Certificate = create_namespaced_resource("cert-manager.io", "v1", "Certificate", "certificates")


def _vs(namespace: str, cm: dict[str, Any], secret: str = "shop-tls") -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "shop", "namespace": namespace, "labels": {"team": "a"}},
        "spec": {
            "host": "shop.k8s.test",
            "tls": {"secret": secret, "cert-manager": cm},
            "upstreams": [{"name": "up", "service": "tea", "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "up"}}],
        },
    }


def _edit(kube: Client, ns: str, cm: dict[str, Any], secret: str = "shop-tls") -> None:
    # The whole spec replaced by a JSON patch, which names no resourceVersion: a
    # read-then-replace lost to ferryman's status write in between (409 Conflict).
    spec = _vs(ns, cm, secret)["spec"]
    kube.patch(
        VirtualServer, "shop", [{"op": "replace", "path": "/spec", "value": spec}],
        namespace=ns, patch_type=PatchType.JSON,
    )  # fmt: skip


def _certificate(kube: Client, ns: str, name: str) -> dict[str, Any] | None:
    for c in kube.list(Certificate, namespace=ns):
        d: dict[str, Any] = c.to_dict()
        if d["metadata"]["name"] == name:
            return d
    return None


def _reasons(kube: Client, ns: str) -> list[str]:
    return [
        e.reason or ""
        for e in kube.list(Event, namespace=ns)
        if e.regarding is not None and e.regarding.kind == "VirtualServer"
    ]


def test_a_virtual_servers_certificate_is_made_followed_and_removed(
    crds: Client, namespace: str, backends: BackendHost, start_ferryman: Callable[..., Ferryman]
) -> None:
    kube, ns = crds, namespace
    with contextlib.suppress(ApiError):  # made by another run on this apiserver
        kube.create(codecs.from_dict(CRD))
    wait_until(
        lambda: any(
            c.type == "Established" and c.status == "True"
            for c in (
                kube.get(CustomResourceDefinition, "certificates.cert-manager.io").status.conditions
                or []
            )  # type: ignore[union-attr]
        ),
        60,
        "the Certificate CRD",
    )
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=ns))
    apply(kube, _vs(ns, {"cluster-issuer": "letsencrypt", "duration": "2160h"}))
    f = start_ferryman("ferryman-cm", "--enable-cert-manager")
    cert = wait_until(lambda: _certificate(kube, ns, "shop-tls"), 60, "the Certificate")
    assert cert["spec"] == {
        "dnsNames": ["shop.k8s.test"],
        "secretName": "shop-tls",
        "issuerRef": {"name": "letsencrypt", "kind": "ClusterIssuer", "group": "cert-manager.io"},
        "usages": ["digital signature", "key encipherment"],
        "duration": "2160h",
    }
    assert cert["metadata"]["labels"] == {"team": "a"}
    (owner,) = cert["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("VirtualServer", "shop", True)
    wait_until(lambda: "CreateCertificate" in _reasons(kube, ns), 60, "CreateCertificate")

    # cert-manager issues the Secret: the host serves TLS with it, no reload.
    reloads = f.reloads()
    apply(kube, {**tls_secret("shop-tls", ["shop.k8s.test"], namespace=ns), "apiVersion": "v1"})
    wait_until(lambda: f.get("shop.k8s.test", "/", https=True).served_by == "tea", 60, "TLS served")
    assert f.reloads() == reloads

    # An edit follows.
    _edit(kube, ns, {"issuer": "internal", "common-name": "shop"})
    wait_until(
        lambda: (
            (_certificate(kube, ns, "shop-tls") or {}).get("spec", {}).get("issuerRef")
            == {"name": "internal", "kind": "Issuer", "group": "cert-manager.io"}
        ),
        60,
        "the edit",
    )
    updated = _certificate(kube, ns, "shop-tls")
    assert updated is not None and updated["spec"]["commonName"] == "shop"
    assert "duration" not in updated["spec"]

    # Another secret name: a new Certificate, the old one deleted.
    _edit(kube, ns, {"issuer": "internal"}, secret="shop-tls-2")
    wait_until(lambda: _certificate(kube, ns, "shop-tls-2"), 60, "the new Certificate")
    wait_until(lambda: _certificate(kube, ns, "shop-tls") is None, 60, "the old one deleted")

    # Someone else's Certificate of the name asked for is left as it is.
    foreign = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "theirs", "namespace": ns},
        "spec": {"secretName": "theirs", "dnsNames": ["x.test"], "issuerRef": {"name": "x"}},
    }
    kube.create(Certificate.from_dict(foreign))
    _edit(kube, ns, {"issuer": "internal"}, secret="theirs")
    wait_until(lambda: "BadConfig" in _reasons(kube, ns), 60, "the Warning")
    kept = _certificate(kube, ns, "theirs")
    assert kept is not None and kept["spec"]["dnsNames"] == ["x.test"]
    # No longer asked for: deleted in the same round as the Warning, in no set order.
    wait_until(lambda: _certificate(kube, ns, "shop-tls-2") is None, 60, "shop-tls-2 deleted")
