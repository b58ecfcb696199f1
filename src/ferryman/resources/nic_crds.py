"""The CustomResourceDefinitions of NIC's VirtualServer, VirtualServerRoute, Policy,
TransportServer and GlobalConfiguration.

Structural schemas with the fields ferryman's parsers read (a unit test holds
the two to the same keys), NIC's names, short names and printer columns, so a
cluster that ran NIC keeps its objects and ``kubectl get vs`` looks the same.
Fields NIC has and ferryman refuses by name (snippets, NGINX Plus features,
oidc, waf...) are kept in the schema so the API server accepts NIC's manifests
and ferryman can say why it does not serve them; the larger of those objects
are ``x-kubernetes-preserve-unknown-fields``. Each kind's ``KindSpec``
(``ferryman.kinds``) names its schema here; ``scripts/nic-crds.py`` writes the
files to deploy/crds and the chart's crds/.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ferryman.engine.kind_spec import Crd, KindSpec

GROUP = "k8s.nginx.org"
Schema = dict[str, Any]


def _s(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def _i(**extra: Any) -> Schema:
    return {"type": "integer", **extra}


def _b() -> Schema:
    return {"type": "boolean"}


def _obj(properties: dict[str, Schema], **extra: Any) -> Schema:
    return {"type": "object", "properties": properties, **extra}


def _arr(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def _str_map() -> Schema:
    return {"type": "object", "additionalProperties": {"type": "string"}}


def _opaque() -> Schema:
    """A field ferryman refuses by name: kept whole, so NIC's manifests apply."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


_HEADER = _obj({"name": _s(), "value": _s()})
_REDIRECT = _obj({"url": _s(), "code": _i()})
_RETURN = _obj({"code": _i(), "type": _s(), "body": _s(), "headers": _arr(_HEADER)})
_ACTION = _obj(
    {
        "pass": _s(),
        "redirect": _REDIRECT,
        "return": _RETURN,
        "proxy": _obj(
            {
                "upstream": _s(),
                "rewritePath": _s(),
                "requestHeaders": _obj({"pass": _b(), "set": _arr(_HEADER)}),
                "responseHeaders": _obj(
                    {
                        "hide": _arr(_s()),
                        "pass": _arr(_s()),
                        "ignore": _arr(_s()),
                        "add": _arr(_obj({"name": _s(), "value": _s(), "always": _b()})),
                    }
                ),
            }
        ),
    }
)
_SPLITS = _arr(_obj({"weight": _i(), "action": _ACTION}))
_POLICY_REFS = _arr(_obj({"name": _s(), "namespace": _s()}))
_CONDITION = _obj(
    {"header": _s(), "cookie": _s(), "argument": _s(), "variable": _s(), "value": _s()}
)
_ROUTE = _obj(
    {
        "path": _s(),
        "policies": _POLICY_REFS,
        "route": _s(),
        "routeSelector": _obj({"matchLabels": _str_map(), "matchExpressions": _arr(_opaque())}),
        "action": _ACTION,
        "splits": _SPLITS,
        "matches": _arr(
            _obj({"conditions": _arr(_CONDITION), "action": _ACTION, "splits": _SPLITS})
        ),
        "errorPages": _arr(_obj({"codes": _arr(_i()), "return": _RETURN, "redirect": _REDIRECT})),
        "location-snippets": _s(),
        "add-header-inherit": _s(),
        "dos": _s(),
    }
)
_TIMES = ("fail-timeout", "connect-timeout", "read-timeout", "send-timeout")
_UPSTREAM = _obj(
    {
        "name": _s(),
        "service": _s(),
        "subselector": _str_map(),
        "port": _i(minimum=0, maximum=65535),
        "lb-method": _s(),
        **{key: _s() for key in _TIMES},
        "max-fails": _i(),
        "max-conns": _i(),
        "keepalive": _i(),
        "next-upstream": _s(),
        "next-upstream-timeout": _s(),
        "next-upstream-tries": _i(),
        "buffering": _b(),
        "buffers": _obj({"number": _i(), "size": _s()}),
        "buffer-size": _s(),
        "busy-buffers-size": _s(),
        "client-max-body-size": _s(),
        "client-body-buffer-size": _s(),
        "tls": _obj({"enable": _b()}),
        "healthCheck": _opaque(),
        "slow-start": _s(),
        "queue": _opaque(),
        "sessionCookie": _obj(
            {
                "enable": _b(),
                "name": _s(),
                "path": _s(),
                "expires": _s(),
                "domain": _s(),
                "httpOnly": _b(),
                "secure": _b(),
                "samesite": _s(),
            }
        ),
        "use-cluster-ip": _b(),
        "ntlm": _b(),
        "type": _s(),
        "backup": _s(),
        "backupPort": _i(minimum=0, maximum=65535),
    }
)
_ENDPOINTS = _arr(_obj({"ip": _s(), "hostname": _s(), "ports": _s()}))
_STATE = {"state": _s(), "reason": _s(), "message": _s()}

VIRTUAL_SERVER_SPEC = _obj(
    {
        "ingressClassName": _s(),
        "host": _s(),
        "listener": _obj({"http": _s(), "https": _s()}),
        "tls": _obj(
            {
                "secret": _s(),
                "redirect": _obj({"enable": _b(), "code": _i(), "basedOn": _s()}),
                "cert-manager": _opaque(),
            }
        ),
        "gunzip": _b(),
        "policies": _POLICY_REFS,
        "upstreams": _arr(_UPSTREAM),
        "routes": _arr(_ROUTE),
        "http-snippets": _s(),
        "server-snippets": _s(),
        "add-header-inherit": _s(),
        "dos": _s(),
        "externalDNS": _opaque(),
    }
)
VIRTUAL_SERVER_ROUTE_SPEC = _obj(
    {
        "ingressClassName": _s(),
        "host": _s(),
        "upstreams": _arr(_UPSTREAM),
        "subroutes": _arr(_ROUTE),
    }
)
_NO_WILDCARD_WITH_CREDENTIALS = {
    "rule": "!(self.allowOrigin.exists(origin, origin == '*') && has(self.allowCredentials) "
    "&& self.allowCredentials == true)",
    "message": "cannot use wildcard '*' for allowOrigin when allowCredentials is true for "
    "security reasons",
}
POLICY_SPEC = _obj(
    {
        "ingressClassName": _s(),
        "accessControl": _obj({"allow": _arr(_s()), "deny": _arr(_s())}),
        "rateLimit": _obj(
            {
                "rate": _s(),
                "key": _s(),
                "delay": _i(),
                "noDelay": _b(),
                "burst": _i(),
                "zoneSize": _s(),
                "dryRun": _b(),
                "logLevel": _s(),
                "rejectCode": _i(),
                "scale": _b(),
                "condition": _obj(
                    {
                        "jwt": _obj(
                            {
                                "claim": _s(pattern="^([^$\\s\"'])*$"),
                                "match": _s(pattern="^([^$\\s.\"'])*$"),
                            },
                            required=["claim", "match"],
                        ),
                        "variables": _arr(
                            _obj(
                                {
                                    "name": _s(pattern="^([^\\s\"'])*$"),
                                    "match": _s(pattern="^([^\\s\"'])*$"),
                                },
                                required=["name", "match"],
                            ),
                            maxItems=1,
                        ),
                        "default": _b(),
                    }
                ),
            }
        ),
        "jwt": _obj(
            {
                "realm": _s(),
                "secret": _s(),
                "token": _s(),
                "jwksURI": _s(),
                "keyCache": _s(),
                "sniEnabled": _b(),
                "sniName": _s(),
                "sslVerify": _b(),
                "trustedCertSecret": _s(),
                "sslVerifyDepth": _i(),
            }
        ),
        "basicAuth": _obj({"realm": _s(), "secret": _s()}),
        "ingressMTLS": _obj(
            {
                "clientCertSecret": _s(),
                "crlFileName": _s(),
                "verifyClient": _s(),
                "verifyDepth": _i(),
            }
        ),
        "egressMTLS": _obj(
            {
                "tlsSecret": _s(),
                "verifyServer": _b(),
                "verifyDepth": _i(),
                "protocols": _s(),
                "sessionReuse": _b(),
                "ciphers": _s(),
                "trustedCertSecret": _s(),
                "serverName": _b(),
                "sslName": _s(),
            }
        ),
        "apiKey": _obj(
            {
                "suppliedIn": _obj({"header": _arr(_s()), "query": _arr(_s())}),
                "clientSecret": _s(),
            }
        ),
        "cors": _obj(
            {
                "allowOrigin": _arr(_s(), minItems=1),
                "allowMethods": _arr(_s()),
                "allowHeaders": _arr(_s()),
                "allowCredentials": _b(),
                "exposeHeaders": _arr(_s()),
                "maxAge": _i(minimum=0),
            },
            required=["allowOrigin"],
            **{"x-kubernetes-validations": [_NO_WILDCARD_WITH_CREDENTIALS]},
        ),
        "oidc": _opaque(),
        "waf": _opaque(),
        "cache": _opaque(),
        "externalAuth": _obj(
            {
                "authURI": _s(),
                "authServiceName": _s(),
                "authServicePorts": _arr(_i()),
                "authSigninURI": _s(),
                "authSnippets": _s(),
                "authSigninRedirectBasePath": _s(),
                "sslEnabled": _b(),
                "sslVerify": _b(),
                "sslVerifyDepth": _i(),
                "trustedCertSecret": _s(),
                "sniName": _s(),
            }
        ),
        "hsts": _opaque(),
    }
)

TRANSPORT_SERVER_SPEC = _obj(
    {
        "ingressClassName": _s(),
        "listener": _obj({"name": _s(), "protocol": _s()}),
        "host": _s(),
        "tls": _obj({"secret": _s()}),
        "upstreams": _arr(
            _obj(
                {
                    "name": _s(),
                    "service": _s(),
                    "port": _i(),
                    "failTimeout": _s(),
                    "maxFails": _i(),
                    "maxConns": _i(),
                    "healthCheck": _opaque(),
                    "loadBalancingMethod": _s(),
                    "backup": _s(),
                    "backupPort": _i(),
                }
            )
        ),
        "upstreamParameters": _obj(
            {
                "udpRequests": _i(),
                "udpResponses": _i(),
                "connectTimeout": _s(),
                "nextUpstream": _b(),
                "nextUpstreamTimeout": _s(),
                "nextUpstreamTries": _i(),
            }
        ),
        "sessionParameters": _obj({"timeout": _s()}),
        "action": _obj({"pass": _s()}),
        "serverSnippets": _s(),
        "streamSnippets": _s(),
    }
)
GLOBAL_CONFIGURATION_SPEC = _obj(
    {
        "listeners": _arr(
            _obj(
                {
                    "name": _s(),
                    "port": _i(),
                    "protocol": _s(),
                    "ssl": _b(),
                    "ipv4": _s(),
                    "ipv6": _s(),
                }
            )
        )
    }
)

STATE_COLUMN = {
    "name": "State",
    "type": "string",
    "jsonPath": ".status.state",
    "description": "Current state of the resource: Valid, Warning or Invalid.",
}
AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
ROUTING_COLUMNS = (
    STATE_COLUMN,
    {"name": "Host", "type": "string", "jsonPath": ".spec.host"},
    {"name": "IP", "type": "string", "jsonPath": ".status.externalEndpoints[*].ip"},
    {
        "name": "ExternalHostname",
        "type": "string",
        "priority": 1,
        "jsonPath": ".status.externalEndpoints[*].hostname",
    },
    {"name": "Ports", "type": "string", "jsonPath": ".status.externalEndpoints[*].ports"},
    AGE_COLUMN,
)
# The status NIC writes: its state, and for routing kinds where they are reached.
STATE_STATUS = _obj(_STATE)
ROUTING_STATUS = _obj({**_STATE, "externalEndpoints": _ENDPOINTS})
ROUTE_STATUS = _obj({**_STATE, "referencedBy": _s(), "externalEndpoints": _ENDPOINTS})
NO_STATUS = _obj({})


def nic_kind(
    kind: str,
    plural: str,
    crd: Crd,
    *,
    keeps: tuple[str, ...] | None = None,
    status: str = "",
    counted: bool = True,
) -> KindSpec:
    """One of NIC's custom resources (k8s.nginx.org/v1, namespaced, its CRD
    possibly absent), with the CRD ferryman ships for it."""
    return KindSpec(
        kind, GROUP, "v1", plural, custom=True, keeps=keeps, status=status, crd=crd,
        counted=counted,
    )  # fmt: skip


_HEADER_COMMENT = """\
# Generated by scripts/nic-crds.py from the kinds' specs (src/ferryman/kinds/): do not edit.
# NIC's {kind} ({api_version}) as ferryman reads it; see docs/{doc}.
"""


def files(specs: Iterable[KindSpec]) -> dict[str, str]:
    """File name -> YAML text of each kind that ships a CRD, for deploy/crds and
    the chart's crds/."""
    # Imported here: the kinds' specs import this module for their schemas on
    # every start, and PyYAML is ~10-20 ms that Kubernetes mode never uses.
    import yaml

    class _NoAliases(yaml.SafeDumper):
        """Schemas share sub-schemas (one action, many places); the files spell each out."""

        def ignore_aliases(self, data: Any) -> bool:
            return True

    out = {}
    for spec in specs:
        if spec.crd is None:
            continue
        text = yaml.dump(spec.crd_object(), Dumper=_NoAliases, sort_keys=False, width=100)
        header = _HEADER_COMMENT.format(
            kind=spec.kind, api_version=spec.api_version, doc=spec.crd.doc
        )
        out[f"{spec.group}_{spec.plural}.yaml"] = header + text
    return out
