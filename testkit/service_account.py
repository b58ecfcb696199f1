"""A kubeconfig that authenticates as a ServiceAccount (a TokenRequest's token): ferryman
run with it gets exactly the RBAC a manifest or chart grants, as in its pod."""

from __future__ import annotations

from pathlib import Path

import yaml
from lightkube import Client
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ServiceAccount

from testkit.apiserver import APIServer


def token_kubeconfig(
    apiserver: APIServer, kube: Client, namespace: str, name: str, out: Path
) -> str:
    """Writes ``out``: the apiserver's cluster with ``namespace/name``'s token; its path."""
    request = ServiceAccount.Token(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=TokenRequestSpec(audiences=[], expirationSeconds=3600),
    )
    token = kube.create(request, name, namespace=namespace)
    assert token.status is not None
    cluster = yaml.safe_load(Path(apiserver.kubeconfig).read_text())["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": name, "user": {"token": token.status.token}}],
        "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
        "current-context": name,
    }
    out.write_text(yaml.safe_dump(config))
    return str(out)
