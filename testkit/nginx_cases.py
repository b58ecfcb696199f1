"""Hypothesis cases of Ingresses, valid and hostile, with the Services they route to
(rendered and checked by ``nginx -t``).

Moved from tests/unit/test_nginx_property.py, whose tests and others share them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from ferryman.configs.model import CATCH_ALL

NAMESPACES = ("default", "team-a")


GOOD_SECRET = "good-tls"


SERVICE = "web"


HOSTILE = [
    ";",
    "{",
    "}",
    '"',
    "'",
    "$",
    " ",
    "\t",
    "\n",
    "\r",
    "\\",
    "#",
    "%",
    "?",
    "${host}",
    "; return 200 pwned;",
    "\n}\nserver {",
]


@dataclass
class Case:
    manifest: dict[str, Any]
    invalid: bool  # holds at least one value the API server or the whitelist refuses

    @property
    def ref(self) -> str:
        md = self.manifest["metadata"]
        return f"Ingress {md['namespace']}/{md['name']}"

    @property
    def hosts(self) -> set[str]:
        """The virtual hosts the Ingress asks for ("_" for host-less rules)."""
        return {r.get("host") or CATCH_ALL for r in self.manifest["spec"]["rules"]}


def _spliced(draw: st.DrawFn, valid: str, start: int = 0) -> str:
    """``valid`` with a hostile string inserted somewhere at or after ``start``."""
    at = draw(st.integers(start, len(valid)))
    return valid[:at] + draw(st.sampled_from(HOSTILE)) + valid[at:]


def _bad(draw: st.DrawFn) -> bool:
    """One value in ten is invalid."""
    return draw(st.integers(0, 9)) == 0


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)


# "web" has a Service with ready endpoints (port 80, named "http"): endpoint records.
_service = st.one_of(
    st.just(SERVICE), st.from_regex(r"[a-z]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
)


_segment = st.text(alphabet="abcXYZ019-._~!*+,=:@&()", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)


_valid_path = st.builds(
    lambda segs, slash: "/" + "/".join(segs) + ("/" if slash and segs else ""),
    st.lists(_segment, max_size=3),
    st.booleans(),
)


@st.composite
def _path(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    path_type = draw(st.sampled_from(["Exact", "Prefix", "ImplementationSpecific"]))
    path = draw(_valid_path)
    invalid = False
    if path_type == "ImplementationSpecific" and draw(st.booleans()):
        path = draw(st.sampled_from(["/a//b", "/a/./b", "/a/../b", "/a/..", "//"]))
    if _bad(draw):
        invalid = True
        kind = draw(st.integers(0, 3))
        if kind == 0 or path_type == "ImplementationSpecific":
            path = _spliced(draw, path, start=1)
        elif kind == 1:
            path = path.lstrip("/") or "relative"
        elif kind == 2:
            path = path.rstrip("/") + "//x"
        else:
            path = path.rstrip("/") + "/../x"
    return {"path": path, "pathType": path_type, "backend": draw(_backend())[0]}, invalid


@st.composite
def _backend(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    name = draw(_service)
    port: dict[str, Any]
    if draw(st.booleans()):
        port = {"number": draw(st.one_of(st.just(80), st.integers(1, 65535)))}
    else:
        port = {"name": draw(st.sampled_from(["http", "web", "h2c", "grpc-web", "1a"]))}
    invalid = False
    if _bad(draw):
        invalid = True
        which = draw(st.integers(0, 2))
        if which == 0:
            name = (
                draw(st.sampled_from(["1svc", "Svc", "svc_1", "a.b"]))
                if draw(st.booleans())
                else _spliced(draw, name)
            )
        elif which == 1:
            port = {"number": draw(st.sampled_from([0, 65536, -1, 100000]))}
        else:
            port = {"name": draw(st.sampled_from(["HTTP", "a--b", "123", "-x"]))}
            if draw(st.booleans()):
                port = {"name": _spliced(draw, "http")}
    return {"service": {"name": name, "port": port}}, invalid


@st.composite
def ingress_case(draw: st.DrawFn, i: int) -> Case:
    invalid = False
    hosts: list[str] = []
    rules = []
    for j in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["exact", "exact", "wildcard"] + (["none"] if i == 0 else [])))
        rule: dict[str, Any] = {}
        if kind == "exact":
            host = f"{draw(_label)}.i{i}r{j}.example.com"
        elif kind == "wildcard":
            host = f"*.i{i}r{j}.example.com"
        else:
            host = ""
        if host and _bad(draw):
            invalid = True
            host = draw(
                st.sampled_from(
                    [
                        _spliced(draw, host),
                        host.upper(),
                        f"a.*.i{i}r{j}.example.com",
                        f"10.0.{i}.{j}",
                        "x" * 64 + f".i{i}r{j}.example.com",
                    ]
                )
            )
        elif host:
            hosts.append(host)
        if host:
            rule["host"] = host
        paths = []
        for _ in range(draw(st.integers(1, 3))):
            path, bad_path = draw(_path())
            backend, bad_backend = draw(_backend())
            path["backend"] = backend
            invalid |= bad_path or bad_backend
            paths.append(path)
        rule["http"] = {"paths": paths}
        rules.append(rule)
    spec: dict[str, Any] = {"rules": rules}
    if draw(st.booleans()):
        backend, bad_backend = draw(_backend())
        spec["defaultBackend"] = backend
        invalid |= bad_backend
    if hosts and draw(st.booleans()):
        secret = draw(st.sampled_from([GOOD_SECRET, GOOD_SECRET, f"missing-{i}"]))
        if _bad(draw):
            invalid = True
            secret = draw(st.sampled_from(["Bad_Secret", _spliced(draw, secret)]))
        tls_hosts = draw(st.lists(st.sampled_from(hosts), min_size=1, unique=True))
        spec["tls"] = [{"hosts": tls_hosts, "secretName": secret}]
    metadata: dict[str, Any] = {
        "name": f"ing-{i}",
        "namespace": draw(st.sampled_from(NAMESPACES)),
        "annotations": {"nginx.org/ssl-redirect": draw(st.sampled_from(["true", "false"]))},
    }
    if draw(st.booleans()):
        spec["ingressClassName"] = "ferryman"
    else:
        metadata["annotations"]["kubernetes.io/ingress.class"] = "ferryman"
    manifest = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": spec,
    }
    return Case(manifest, invalid)


@st.composite
def ingress_cases(draw: st.DrawFn) -> list[Case]:
    return [draw(ingress_case(i)) for i in range(draw(st.integers(1, 4)))]


def service_docs(namespace: str) -> list[dict[str, Any]]:
    """Service "web" (port 80 "http" -> 8080) with two ready endpoints and one not ready."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": namespace},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-1",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": SERVICE},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [
                {"addresses": ["10.0.0.1", "10.0.0.2"], "conditions": {"ready": True}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": False}},
            ],
        },
    ]
