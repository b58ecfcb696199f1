"""NIC custom resources for the parser tests: one of each kind using every field ferryman reads,
and the locations of NIC's own example manifests."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
VENDOR = Path(os.environ.get("FERRYMAN_VENDOR", ROOT.parent / "shared" / "vendor"))
NIC_EXAMPLES = VENDOR / "nic-examples-v5.5.4" / "custom-resources"
KINDS = ("VirtualServer", "VirtualServerRoute", "Policy")


def nic_examples() -> list[tuple[str, dict[str, Any]]]:
    """(file/name, object) for every VirtualServer, VirtualServerRoute and Policy manifest:
    the example files, and the manifests NIC's READMEs show in yaml blocks (README.md#n)."""
    if not NIC_EXAMPLES.is_dir():
        # Not a skip: these tests are the compatibility claim, and CI has the vendor tree.
        raise AssertionError(f"no NIC examples at {NIC_EXAMPLES} (set FERRYMAN_VENDOR)")
    out = []
    for path in sorted(NIC_EXAMPLES.rglob("*.y*ml")):
        out += _manifests(str(path.relative_to(NIC_EXAMPLES)), path.read_text())
    for path in sorted(NIC_EXAMPLES.rglob("README.md")):
        blocks = re.findall(r"```ya?ml\n(.*?)```", path.read_text(), re.DOTALL)
        for i, block in enumerate(blocks):
            try:
                out += _manifests(f"{path.relative_to(NIC_EXAMPLES)}#{i}", block)
            except yaml.YAMLError:
                continue  # an excerpt with "..." in it, not a manifest
    return out


def _manifests(where: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{where}/{doc['metadata']['name']}", doc)
        for doc in yaml.safe_load_all(text)
        if isinstance(doc, dict) and doc.get("kind") in KINDS
    ]


def meta(name: str = "x", namespace: str = "default") -> dict[str, Any]:
    return {"name": name, "namespace": namespace}


_ACTION_PROXY = {
    "proxy": {
        "upstream": "tea",
        "rewritePath": "/v2",
        "requestHeaders": {
            "pass": False,
            "set": [{"name": "X-Client", "value": "${remote_addr} ${http_user_agent}"}],
        },
        "responseHeaders": {
            "hide": ["X-Powered-By"],
            "pass": ["Server"],
            "ignore": ["Expires"],
            "add": [{"name": "X-Route", "value": "tea", "always": True}],
        },
    }
}

VIRTUAL_SERVER: dict[str, Any] = {
    "apiVersion": "k8s.nginx.org/v1",
    "kind": "VirtualServer",
    "metadata": meta("cafe"),
    "spec": {
        "ingressClassName": "ferryman",
        "host": "cafe.example.com",
        "tls": {
            "secret": "cafe-secret",
            "redirect": {"enable": True, "code": 308, "basedOn": "x-forwarded-proto"},
        },
        "policies": [{"name": "rate-limit", "namespace": "shared"}],
        "upstreams": [
            {
                "name": "tea",
                "service": "tea-svc",
                "subselector": {"version": "v1"},
                "port": 80,
                "lb-method": "hash $request_uri consistent",
                "fail-timeout": "10s",
                "max-fails": 3,
                "max-conns": 100,
                "keepalive": 32,
                "connect-timeout": "30s",
                "read-timeout": "1m 30s",
                "send-timeout": "500ms",
                "next-upstream": "error timeout http_502",
                "next-upstream-timeout": "5s",
                "next-upstream-tries": 2,
                "buffering": True,
                "buffers": {"number": 8, "size": "4k"},
                "buffer-size": "8k",
                "busy-buffers-size": "16k",
                "client-max-body-size": "2G",
                "client-body-buffer-size": "16k",
                "tls": {"enable": True},
                "type": "http",
            },
            {"name": "coffee", "service": "other-ns/coffee-svc", "port": 8080, "type": "grpc"},
        ],
        "routes": [
            {
                "path": "/tea",
                "policies": [{"name": "jwt"}],
                "action": _ACTION_PROXY,
                "errorPages": [
                    {
                        "codes": [502, 503],
                        "return": {
                            "code": 200,
                            "type": "application/json",
                            "body": '{\\"status\\": \\"${upstream_status}\\"}',
                            "headers": [{"name": "X-Debug", "value": "${upstream_status}"}],
                        },
                    },
                    {
                        "codes": [404],
                        "redirect": {"url": "${scheme}://cafe.example.com/", "code": 302},
                    },
                ],
            },
            {
                "path": "~* ^/coffee/(.*)$",
                "matches": [
                    {
                        "conditions": [
                            {"header": "X-Version", "value": "v2"},
                            {"cookie": "flavour", "value": "dark"},
                            {"argument": "size", "value": "large"},
                            {"variable": "$request_method", "value": "POST"},
                        ],
                        "action": {"pass": "coffee"},
                    },
                    {
                        "conditions": [{"header": "X-Canary", "value": "on"}],
                        "splits": [
                            {"weight": 50, "action": {"pass": "tea"}},
                            {"weight": 50, "action": copy.deepcopy(_ACTION_PROXY)},
                        ],
                    },
                ],
                "splits": [
                    {"weight": 90, "action": {"pass": "coffee"}},
                    {
                        "weight": 10,
                        "action": {"redirect": {"url": "https://${host}${request_uri}"}},
                    },
                ],
            },
            {
                "path": "=/health",
                "action": {
                    "return": {
                        "code": 200,
                        "type": "text/plain",
                        "body": "OK ${request_uri}\n",
                        "headers": [{"name": "Cache-Control", "value": "no-store"}],
                    }
                },
            },
            {"path": "/juice", "route": "juice/juice-routes"},
            {"path": "/bar", "routeSelector": {"matchLabels": {"app": "bar"}}},
        ],
    },
}

VIRTUAL_SERVER_ROUTE: dict[str, Any] = {
    "apiVersion": "k8s.nginx.org/v1",
    "kind": "VirtualServerRoute",
    "metadata": meta("juice-routes", "juice"),
    "spec": {
        "ingressClassName": "ferryman",
        "host": "cafe.example.com",
        "upstreams": [{"name": "juice", "service": "juice-svc", "port": 80}],
        "subroutes": [
            {"path": "/juice/orange", "action": {"pass": "juice"}},
            {"path": "/juice", "action": {"pass": "juice"}, "policies": [{"name": "cors"}]},
        ],
    },
}


def policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": meta(name),
        "spec": spec,
    }


POLICIES: list[dict[str, Any]] = [
    policy(
        "allow", {"ingressClassName": "ferryman", "accessControl": {"allow": ["10.0.0.0/8", "::1"]}}
    ),
    policy(
        "rate",
        {
            "rateLimit": {
                "rate": "10r/s",
                "key": "${binary_remote_addr}",
                "delay": 5,
                "noDelay": False,
                "burst": 20,
                "zoneSize": "10M",
                "dryRun": False,
                "logLevel": "warn",
                "rejectCode": 429,
                "scale": True,
                "condition": {
                    "variables": [{"name": "$request_method", "match": "~GET|HEAD"}],
                    "default": True,
                },
            }
        },
    ),
    policy(
        "rate-jwt",
        {
            "rateLimit": {
                "rate": "1r/m",
                "key": "${jwt_claim_sub}",
                "zoneSize": "64k",
                "condition": {"jwt": {"claim": "user.tier", "match": "premium"}},
            }
        },
    ),
    policy("jwt", {"jwt": {"realm": "My API", "secret": "jwk-secret", "token": "$http_token"}}),
    policy("basic", {"basicAuth": {"realm": "Cafe App", "secret": "cafe-passwd"}}),
    policy(
        "api-key",
        {
            "apiKey": {
                "suppliedIn": {"header": ["X-API-Key"], "query": ["api-key"]},
                "clientSecret": "keys",
            }
        },
    ),
    policy(
        "ingress-mtls",
        {"ingressMTLS": {"clientCertSecret": "ca", "verifyClient": "optional", "verifyDepth": 2}},
    ),
    policy(
        "egress-mtls",
        {
            "egressMTLS": {
                "tlsSecret": "client-cert",
                "verifyServer": True,
                "verifyDepth": 2,
                "protocols": "TLSv1.2 TLSv1.3",
                "sessionReuse": False,
                "ciphers": "HIGH:!aNULL:!MD5",
                "trustedCertSecret": "backend-ca",
                "serverName": True,
                "sslName": "backend.example.com",
            }
        },
    ),
    policy(
        "cors",
        {
            "cors": {
                "allowOrigin": ["https://example.com", "https://*.example.org:8443"],
                "allowMethods": ["GET", "POST"],
                "allowHeaders": ["Content-Type", "*"],
                "allowCredentials": True,
                "exposeHeaders": ["X-Total-Count"],
                "maxAge": 600,
            }
        },
    ),
]
