"""The jwt and ingressMTLS Policies in Kubernetes mode on a real kube-apiserver:
their Secrets (types nginx.org/jwk and nginx.org/ca, each listed by its own
informer) are read, enforced, and a Secret replaced through the API takes effect
with no reload."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightkube import Client

from testkit.apiserver import apply, wait_until
from testkit.harness import Ferryman, served_by, service_with_backends, tls_secret
from testkit.jose import jwk, jwk_secret, jwks, token
from testkit.mtls import mtls_get
from testkit.netns import BackendHost
from testkit.pki import authority, ca_secret, issue


def _policy(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    md = {"name": name, "namespace": namespace}
    return {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy", "metadata": md, "spec": spec}


def _vs(name: str, namespace: str, host: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "host": host,
            "upstreams": [{"name": "up", "service": "tea", "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "up"}}],
            **spec,
        },
    }


def test_jwt_and_ingress_mtls_secrets_from_the_api(
    tmp_path: Path, crds: Client, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    kube = crds
    ns = namespace
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=ns))
    apply(
        kube,
        jwk_secret("keys", jwks(jwk("RS256", "one")), namespace=ns),
        _policy("jwt", ns, jwt={"realm": "k8s", "secret": "keys"}),
        _vs("api", ns, "jwt.k8s.test", policies=[{"name": "jwt"}]),
        {**tls_secret("tls", ["mtls.k8s.test"], namespace=ns), "apiVersion": "v1"},
        ca_secret("clients", authority("k8s-clients").cert_pem, namespace=ns),
        _policy("mtls", ns, ingressMTLS={"clientCertSecret": "clients"}),
        _vs("app", ns, "mtls.k8s.test", tls={"secret": "tls"}, policies=[{"name": "mtls"}]),
    )
    f = start_ferryman("ferryman-auth")
    exp = int(time.time()) + 300
    old = {"Authorization": "Bearer " + token("RS256", {"exp": exp}, kid="one")}
    assert f.get("jwt.k8s.test", "/").status == 401
    assert served_by(f, "jwt.k8s.test", "/", headers=old) == "tea"
    alice = issue("k8s-clients", "alice")
    assert mtls_get(f, tmp_path, "mtls.k8s.test", None)[0] == 400
    assert mtls_get(f, tmp_path, "mtls.k8s.test", alice)[0] == 200

    # Both Secrets replaced through the API: the old key and CA no longer pass.
    apply(kube, jwk_secret("keys", jwks(jwk("ES256", "two")), namespace=ns))
    apply(kube, ca_secret("clients", authority("k8s-other").cert_pem, namespace=ns))
    wait_until(lambda: f.get("jwt.k8s.test", "/", headers=old).status == 401, 60, "new keys")
    new = {"Authorization": "Bearer " + token("ES256", {"exp": exp}, kid="two")}
    assert served_by(f, "jwt.k8s.test", "/", headers=new) == "tea"
    wait_until(lambda: mtls_get(f, tmp_path, "mtls.k8s.test", alice)[0] == 400, 60, "new CA")
    assert mtls_get(f, tmp_path, "mtls.k8s.test", issue("k8s-other", "bob"))[0] == 200
    assert f.reloads() == 1
