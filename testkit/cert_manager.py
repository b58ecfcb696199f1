"""A stand-in for cert-manager's Certificate CRD: the API group, version,
names and scope cert-manager serves, with the spec kept whole. No cert-manager
runs in the tests; a test issues the Secret itself, as cert-manager would."""

from __future__ import annotations

from typing import Any

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "certificates.cert-manager.io"},
    "spec": {
        "group": "cert-manager.io",
        "names": {
            "kind": "Certificate",
            "listKind": "CertificateList",
            "plural": "certificates",
            "singular": "certificate",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}
