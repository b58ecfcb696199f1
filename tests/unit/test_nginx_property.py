"""Random Ingress manifests -> ``ferryman.app.render`` -> a real ``nginx -t``.

Whatever users write, the configuration ferryman renders must be accepted by
NGINX, every Ingress holding an invalid value must be rejected (and reported),
and every valid one must be served.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferryman.app import render
from ferryman.settings import Settings

from ._tls import tls_secret

MODULES = Path("/usr/lib/nginx/modules")


NAMESPACES = ("default", "team-a")
GOOD_SECRET = "good-tls"
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
    def file(self) -> str:
        md = self.manifest["metadata"]
        return f"conf.d/{md['namespace']}_{md['name']}.conf"


def _spliced(draw: st.DrawFn, valid: str, start: int = 0) -> str:
    """``valid`` with a hostile string inserted somewhere at or after ``start``."""
    at = draw(st.integers(start, len(valid)))
    return valid[:at] + draw(st.sampled_from(HOSTILE)) + valid[at:]


def _bad(draw: st.DrawFn) -> bool:
    """One value in ten is invalid."""
    return draw(st.integers(0, 9)) == 0


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
_service = st.from_regex(r"[a-z]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
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
        port = {"number": draw(st.integers(1, 65535))}
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
        secret = draw(st.sampled_from([GOOD_SECRET, f"missing-{i}"]))
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


def check(cases: list[Case]) -> None:
    with tempfile.TemporaryDirectory(prefix="ferryman-prop-") as tmp:
        root = Path(tmp)
        manifests, out = root / "manifests", root / "out"
        manifests.mkdir()
        secrets = [tls_secret(GOOD_SECRET, ns) for ns in NAMESPACES]
        (manifests / "secrets.yaml").write_text(yaml.safe_dump_all(secrets))
        for n, case in enumerate(cases):
            (manifests / f"ingress-{n}.yaml").write_text(yaml.safe_dump(case.manifest))
        problems = asyncio.run(
            render(
                Settings(state_dir=out, manifests=manifests, http_port=18080, https_port=18443),
                out,
            )
        )
        result = subprocess.run(
            ["nginx", "-t", "-p", str(out), "-c", str(out / "nginx.conf"), "-e", "stderr"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        for case in cases:
            rejected = [p for p in problems if p.startswith(f"{case.ref}: Rejected")]
            if case.invalid:
                assert rejected, f"{case.ref} holds an invalid value but was accepted"
            else:
                assert not rejected, rejected
                if any(r.get("host") for r in case.manifest["spec"]["rules"]):
                    assert (out / case.file).exists(), case.file
        # Nothing else went wrong: only the invalid Ingresses were reported.
        expected = {c.ref for c in cases if c.invalid}
        assert {p.split(":")[0] for p in problems} <= expected, problems


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases=ingress_cases())
def test_random_ingresses_render_to_a_configuration_nginx_accepts(cases: list[Case]) -> None:
    check(cases)


def _ingress(path: str = "/", host: str = "a.example.com", **backend: Any) -> dict[str, Any]:
    service = {"name": backend.get("service", "web"), "port": backend.get("port", {"number": 80})}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "attack", "namespace": "default"},
        "spec": {
            "ingressClassName": "ferryman",
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {"path": path, "pathType": "Prefix", "backend": {"service": service}}
                        ]
                    },
                }
            ],
        },
    }


BENIGN = Case(
    {**_ingress("/ok", "ok.example.com"), "metadata": {"name": "ok", "namespace": "default"}},
    invalid=False,
)


@pytest.mark.parametrize(
    "manifest",
    [
        _ingress("/x; return 200 pwned; #"),
        _ingress("/x {\n}\nlocation /y"),
        _ingress("/x\n"),
        _ingress("/${host}"),
        _ingress(host="a.example.com; return 200 pwned"),
        _ingress(host="a.example.com\n"),
        _ingress(service="web\n"),
        _ingress(service='web"; proxy_pass http://evil; #'),
        _ingress(port={"name": "http\n"}),
        _ingress(port={"name": "http;"}),
    ],
    ids=repr,
)
def test_injection_attempts_are_rejected(manifest: dict[str, Any]) -> None:
    check([Case(manifest, True), BENIGN])
