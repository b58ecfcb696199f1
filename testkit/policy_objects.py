"""Policies, Secrets and a reads view over them, for the policy translators' unit tests.

Moved from tests/unit/test_vs_policies.py, whose tests and others share them."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from ferryman.configs.secret_state import SecretRead
from ferryman.kinds.policy.parse.policy import Policy, parse_policy
from ferryman.resources.meta import InvalidResource


def _policy(name: str, cls: str = "", **spec: Any) -> dict[str, Any]:
    if cls:
        spec["ingressClassName"] = cls
    md = {"name": name, "namespace": "ns"}
    return {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy", "metadata": md, "spec": spec}


def _secret(name: str, type_: str, data: dict[str, bytes]) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    return {
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "ns"},
        "type": type_,
        "data": encoded,
    }


class Objects:
    """The store's objects, read as reads.Reads reads them."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {(o["kind"], o["metadata"]["name"]): o for o in objs}

    def policy(self, namespace: str, name: str) -> Policy | None:
        obj = self.objs.get(("Policy", name))
        return None if obj is None else parse_policy(obj).resource

    def granted(self, *reference: Any) -> bool:
        return True  # outside tenant mode

    def secret_read(
        self, namespace: str, name: str, parser: Callable[[Mapping[str, Any]], Any]
    ) -> SecretRead[Any]:
        obj = self.objs.get(("Secret", name))
        if obj is None:
            return SecretRead(None, "", "secret doesn't exist or of an unsupported type")
        try:
            return SecretRead(parser(obj), obj["type"], None)
        except InvalidResource as e:
            return SecretRead(None, obj["type"], str(e))
