"""Valid objects of each kind and hypothesis strategies of raw objects, for the parsers' fuzz tests.

Moved from tests/unit/test_parsers_fuzz.py, whose tests and others share them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.resources.ingress_class import parse_ingress_class
from ferryman.resources.secret import parse_tls_secret
from ferryman.resources.service import parse_endpoint_slice, parse_service
from testkit.strategies import yaml_scalars, yaml_values
from testkit.tls import tls_secret

Parser = Callable[[Mapping[str, Any]], object]


BACKEND = {"service": {"name": "web", "port": {"number": 80}}}


INGRESS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "creationTimestamp": "2024-01-02T03:04:05Z",
        "annotations": {
            "nginx.org/lb-method": "least_conn",
            "nginx.org/max-fails": "3",
            "nginx.org/fail-timeout": "10s",
            "nginx.org/ssl-redirect": "false",
        },
        "labels": {"app": "web"},
    },
    "spec": {
        "ingressClassName": "ferryman",
        "defaultBackend": BACKEND,
        "tls": [{"hosts": ["a.example.com"], "secretName": "a-tls"}],
        "rules": [
            {
                "host": "a.example.com",
                "http": {
                    "paths": [
                        {"path": "/", "pathType": "Prefix", "backend": BACKEND},
                        {
                            "path": "/api",
                            "pathType": "Exact",
                            "backend": {"service": {"name": "api", "port": {"name": "http"}}},
                        },
                    ]
                },
            },
            {
                "host": "*.b.example.com",
                "http": {"paths": [{"pathType": "Prefix", "path": "/b", "backend": BACKEND}]},
            },
        ],
    },
}


INGRESS_CLASS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {
        "name": "ferryman",
        "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"},
    },
    "spec": {"controller": "ferryman.io/ingress-controller"},
}


SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"port": 9090}]},
}


SLICE = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {
        "name": "web-1",
        "namespace": "shop",
        "labels": {"kubernetes.io/service-name": "web"},
    },
    "addressType": "IPv4",
    "ports": [{"name": "http", "port": 8080}],
    "endpoints": [
        {"addresses": ["10.0.0.1"], "conditions": {"ready": True}, "nodeName": "n1"},
        {"addresses": ["10.0.0.2", "10.0.0.3"]},
    ],
}


SECRET = tls_secret("site")


VALID: dict[str, tuple[Mapping[str, Any], Parser]] = {
    "Ingress": (INGRESS, parse_ingress),
    "IngressClass": (INGRESS_CLASS, parse_ingress_class),
    "Service": (SERVICE, parse_service),
    "EndpointSlice": (SLICE, parse_endpoint_slice),
    "Secret": (SECRET, parse_tls_secret),
}


# Random top-level objects: mostly the field names parsers look for.
FIELDS = st.sampled_from(
    [
        *("apiVersion", "kind", "metadata", "spec", "type", "data", "stringData"),
        *("addressType", "ports", "endpoints", "name", "namespace", "annotations", "labels"),
    ]
)


raw_objects = st.dictionaries(FIELDS | yaml_scalars, yaml_values, max_size=6)


# metadata that passes its first check, so the rest of the object is reached.
objects_with_names = st.builds(
    lambda obj, md: {**obj, "metadata": {"name": "x", **md}},
    raw_objects,
    st.dictionaries(FIELDS | yaml_scalars, yaml_values, max_size=4),
)
