"""networking.k8s.io/v1 Ingress: typed view and validation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ferryman.kinds.ingress.parse import annotations as nginx_org
from ferryman.kinds.ingress.parse import ingress_nginx
from ferryman.kinds.ingress.parse.annotations import too_many
from ferryman.kinds.ingress.parse.ingress_nginx_canary import (
    Canary,
    canary_annotations,
    parse_canary,
)
from ferryman.kinds.ingress.parse.ingress_nginx_limits import ClientLimits
from ferryman.kinds.ingress.parse.ingress_nginx_paths import Paths, with_aliases, with_www
from ferryman.kinds.policy.parse.cors import CORS
from ferryman.kinds.policy.parse.external_auth import ExternalAuth
from ferryman.kinds.policy.parse.policy import AccessControl, EgressMTLS, IngressMTLS
from ferryman.resources import validation
from ferryman.resources.meta import InvalidResource, Meta, parse_meta
from ferryman.resources.nic_fields import required
from ferryman.resources.policy_ref import PolicyRef

LEGACY_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
SSL_REDIRECT_ANNOTATION = "nginx.org/ssl-redirect"
PATH_TYPES = ("Exact", "Prefix", "ImplementationSpecific")
# NGINX answers 414 to a request line over 8 KB (large_client_header_buffers
# 4 8k), so a longer path could never match; 4 KiB leaves room for the query.
MAX_PATH_LENGTH = 4096
# The largest Ingresses in real use (generated from API gateway routes) hold a
# few hundred paths; every path is matched per request from one host record,
# so a thousand keeps that record, and the work to rebuild it, bounded.
MAX_PATHS = 1000
# One rule per host: a thousand hosts in one Ingress is far past real use
# (cert-manager's own limit for one certificate is 100 names).
MAX_RULES = 1000


@dataclass(frozen=True)
class Balancing:
    """How a host's backends spread load (NIC's annotations, NGINX's defaults)."""

    method: str = "rr"  # "rr" round-robin, "lc" least connections
    max_fails: int = 1  # failed attempts before a peer is skipped; 0 never skips
    fail_timeout: float = 10.0  # seconds a failing peer is skipped

    def encode(self) -> str:
        # Fixed point: the routers read digits and a dot, never an exponent
        # (":g" wrote 1e+06 for a 12-day timeout, which they took as the default).
        timeout = f"{self.fail_timeout:.3f}".rstrip("0").rstrip(".")
        return f"{self.method}:{self.max_fails}:{timeout}"


@dataclass(frozen=True)
class ServiceBackend:
    service: str
    port: int | str  # a number, or a Service port name

    @property
    def port_ref(self) -> str:
        return str(self.port)


@dataclass(frozen=True)
class HTTPPath:
    path: str
    path_type: str
    backend: ServiceBackend


@dataclass(frozen=True)
class Rule:
    host: str  # "" when the rule has no host: it applies to every host
    paths: tuple[HTTPPath, ...]


@dataclass(frozen=True)
class TLS:
    hosts: tuple[str, ...]
    secret_name: str


@dataclass(frozen=True)
class Ingress:
    # The kind it claims hosts as (configuration.Claimant).
    kind: ClassVar[str] = "Ingress"
    meta: Meta
    class_name: str | None
    default_backend: ServiceBackend | None
    rules: tuple[Rule, ...]
    tls: tuple[TLS, ...]
    balancing: Balancing = Balancing()
    warnings: tuple[str, ...] = ()  # accepted, but worth an event
    policies: tuple[PolicyRef, ...] = ()  # nginx.org/policies, in order
    mergeable: str | None = None  # "master" or "minion" (nginx.org/mergeable-ingress-type)
    # ingress-nginx's access annotations as Policy configurations (ingress_nginx_access).
    annotation_policies: tuple[
        AccessControl | CORS | EgressMTLS | ExternalAuth | IngressMTLS, ...
    ] = ()
    # ingress-nginx's rewrite-target, app-root and redirects (ingress_nginx_paths).
    paths: Paths = field(default_factory=Paths)
    # ingress-nginx's canary: its paths join a main Ingress's (records/canary_host.py).
    canary: Canary | None = None
    # ingress-nginx's limit-connections and limit-allowlist (ingress_nginx_limits).
    client_limits: ClientLimits | None = None
    # ingress-nginx's default-backend: the Service serving while a path's has no endpoint.
    fallback_service: str | None = None
    error_codes: tuple[int, ...] = ()  # custom-http-errors, which fallback_service answers
    # ingress-nginx's proxy-request-buffering: "off" (the body streamed upstream).
    request_streamed: bool = False
    # ingress-nginx's ssl-passthrough: its hosts' TLS goes undecrypted to the
    # backend of "/" (ingress_nginx_passthrough, records/passthrough.py).
    ssl_passthrough: bool = False
    # ingress-nginx's session-cookie-conditional-samesite-none (StickyCookie's).
    samesite_none_conditional: bool = False

    @property
    def variety(self) -> str:
        """The resource gauge's split (Claimant): "", "master" or "minion"."""
        return self.mergeable or ""

    @property
    def ssl_redirect(self) -> bool:
        return self.meta.annotations.get(SSL_REDIRECT_ANNOTATION, "true").lower() != "false"

    def hosts(self) -> tuple[str, ...]:
        """Every host the Ingress routes for, in rule order, "" for host-less rules.
        A minion claims none: its paths are served by its master's host; nor
        does a canary: its paths are served by its main Ingress's host."""
        if self.mergeable == "minion" or self.canary is not None:
            return ()
        seen: dict[str, None] = {}
        for rule in self.rules:
            seen.setdefault(rule.host, None)
        if not self.rules and self.default_backend is not None:
            seen.setdefault("", None)
        return tuple(seen)

    def services(self) -> set[ServiceBackend]:
        found = {p.backend for r in self.rules for p in r.paths}
        if self.default_backend is not None:
            found.add(self.default_backend)
        return found


def _backend(raw: object, where: str, errors: list[str]) -> ServiceBackend | None:
    if not isinstance(raw, Mapping):
        errors.append(f"{where}: must be an object")
        return None
    if "resource" in raw:
        errors.append(
            f"{where}.resource: resource backends are not supported by ferryman; "
            "use a service backend"
        )
        return None
    svc = raw.get("service")
    if not isinstance(svc, Mapping) and "serviceName" in raw:
        # networking.k8s.io/v1beta1's backend, as some of NIC's READMEs still show.
        errors.append(
            f"{where}.serviceName: v1beta1's field (removed in Kubernetes 1.22); "
            "networking.k8s.io/v1 takes service.name and service.port"
        )
        return None
    if not isinstance(svc, Mapping):
        errors.append(f"{where}.service: required")
        return None
    name = svc.get("name")
    if not isinstance(name, str) or (problem := validation.dns1035_label(name)):
        errors.append(f"{where}.service.name: {problem if isinstance(name, str) else 'required'}")
        return None
    port = svc.get("port")
    if not isinstance(port, Mapping):
        errors.append(f"{where}.service.port: required")
        return None
    number, pname = port.get("number"), port.get("name")
    if number is not None and pname is not None:
        errors.append(f"{where}.service.port: number and name are mutually exclusive")
        return None
    if number is not None:
        if problem := validation.port_number(number):
            errors.append(f"{where}.service.port.number: {problem}")
            return None
        return ServiceBackend(name, int(number))
    if isinstance(pname, str):
        if problem := validation.port_name(pname):
            errors.append(f"{where}.service.port.name: {problem}")
            return None
        return ServiceBackend(name, pname)
    errors.append(f"{where}.service.port: one of number or name is required")
    return None


def _rules(raw: object, errors: list[str], regex: bool = False) -> list[Rule]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append("spec.rules: must be a list")
        return []
    if len(raw) > MAX_RULES:
        errors.append(f"spec.rules: {len(raw)} rules; at most {MAX_RULES} are allowed")
        return []
    if (count := _path_count(raw)) > MAX_PATHS:
        errors.append(f"spec.rules: {count} paths in all; at most {MAX_PATHS} are allowed")
        return []
    rules = []
    for i, r in enumerate(raw):
        where = f"spec.rules[{i}]"
        if not isinstance(r, Mapping):
            errors.append(f"{where}: must be an object")
            continue
        host = r.get("host")
        if host is None:
            host = ""
        if not isinstance(host, str):
            errors.append(f"{where}.host: must be a string")
            continue
        if host and (problem := validation.host(host)):
            errors.append(f"{where}.host: {host!r} {problem}")
            continue
        http = r.get("http")
        paths: list[HTTPPath] = []
        if http is not None:
            raw_paths = http.get("paths") if isinstance(http, Mapping) else None
            if not isinstance(raw_paths, list) or not raw_paths:
                errors.append(f"{where}.http.paths: required")
                continue
            for j, p in enumerate(raw_paths):
                parsed = _path(p, f"{where}.http.paths[{j}]", errors, regex)
                if parsed is not None:
                    paths.append(parsed)
        rules.append(Rule(host, tuple(paths)))
    return rules


def _path_count(rules: list[object]) -> int:
    count = 0
    for r in rules:
        http = r.get("http") if isinstance(r, Mapping) else None
        paths = http.get("paths") if isinstance(http, Mapping) else None
        count += len(paths) if isinstance(paths, list) else 0
    return count


def _path(raw: object, where: str, errors: list[str], regex: bool = False) -> HTTPPath | None:
    if not isinstance(raw, Mapping):
        errors.append(f"{where}: must be an object")
        return None
    path_type = raw.get("pathType")
    if path_type not in PATH_TYPES:
        errors.append(f"{where}.pathType: must be one of {', '.join(PATH_TYPES)}")
        _backend(raw.get("backend"), f"{where}.backend", errors)  # its problems too
        return None
    path = raw.get("path")
    if path in (None, "") and path_type == "ImplementationSpecific":
        path = "/"
    if not isinstance(path, str):
        errors.append(f"{where}.path: required")
        return None
    if len(path) > MAX_PATH_LENGTH:
        errors.append(
            f"{where}.path: {len(path)} characters long; at most {MAX_PATH_LENGTH} are allowed"
        )
        return None
    if regex and path_type != "Exact":
        # nginx.org/path-regex: a regular expression, NIC's validatePath.
        if problem := nginx_org.regex_path(path):
            errors.append(f"{where}.path: Invalid value: {path!r}: {problem}")
            return None
    elif problem := validation.http_path(path, path_type):
        errors.append(f"{where}.path: {path!r} {problem}")
        return None
    backend = _backend(raw.get("backend"), f"{where}.backend", errors)
    return HTTPPath(path, path_type, backend) if backend else None


def _tls(raw: object, errors: list[str]) -> list[TLS]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append("spec.tls: must be a list")
        return []
    out = []
    for i, t in enumerate(raw):
        where = f"spec.tls[{i}]"
        if not isinstance(t, Mapping):
            errors.append(f"{where}: must be an object")
            continue
        hosts = t.get("hosts") or []
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            errors.append(f"{where}.hosts: must be a list of host names")
            continue
        bad = [h for h in hosts if validation.host(h)]
        if bad:
            errors.append(f"{where}.hosts: {bad[0]!r} {validation.host(bad[0])}")
            continue
        # No secretName (Kubernetes allows it): NIC's --wildcard-tls-secret serves
        # those hosts, or their handshakes are rejected (records/virtual_hosts.py).
        secret = t.get("secretName") or ""
        if not isinstance(secret, str) or (
            secret and (problem := validation.dns1123_subdomain(secret))
        ):
            errors.append(
                f"{where}.secretName: {problem if isinstance(secret, str) else 'must be a string'}"
            )
            continue
        out.append(TLS(tuple(hosts), secret))
    return out


def _balancing(parsed: Mapping[str, object]) -> Balancing:
    """The H record's balancing (the fast path's): round-robin or least_conn; the
    other methods are served on the slow path (``configs/ingress_options``)."""
    method = parsed.get("lb-method", "round_robin")
    max_fails = parsed.get("max-fails", 1)
    fail_timeout = parsed.get("fail-timeout", 10_000)
    return Balancing(
        "lc" if method == "least_conn" else "rr",
        max_fails if isinstance(max_fails, int) else 1,
        fail_timeout / 1000 if isinstance(fail_timeout, int) else 10.0,
    )


def _mergeable(spec: Mapping[str, Any], kind: str, errors: list[str]) -> None:
    """NIC's validateMasterSpec and validateMinionSpec."""
    rules = spec.get("rules") if isinstance(spec.get("rules"), list) else []
    assert isinstance(rules, list)
    tls = spec.get("tls") if isinstance(spec.get("tls"), list) else []
    assert isinstance(tls, list)
    if kind == "minion" and tls:
        errors.append(str(too_many("spec.tls", len(tls), 0)))
    if len(rules) != 1:
        errors.append(str(too_many("spec.rules", len(rules), 1)))
        return
    http = rules[0].get("http") if isinstance(rules[0], Mapping) else None
    paths = http.get("paths") if isinstance(http, Mapping) else None
    count = len(paths) if isinstance(paths, list) else 0
    where = "spec.rules[0].http.paths"
    if kind == "master" and count:
        errors.append(str(too_many(where, count, 0)))
    elif kind == "minion" and not count:
        errors.append(str(required(where, "must include at least one path")))


def parse_ingress(obj: Mapping[str, Any]) -> Ingress:
    """Validate a raw Ingress; raises InvalidResource listing every problem."""
    meta = parse_meta(obj)
    errors: list[str] = []
    canary, canary_warnings = parse_canary(meta.annotations)
    if canary is not None:
        # ingress-nginx reads a canary's canary annotations only (said in a warning).
        meta = replace(meta, annotations=canary_annotations(meta.annotations))
    # ingress-nginx's annotations as the nginx.org/* ones of the same meaning.
    translated = ingress_nginx.translate(meta.annotations, obj.get("spec"), meta.namespace)
    meta = replace(meta, annotations=translated.annotations)
    errors.extend(translated.problems)
    if problem := validation.dns1123_subdomain(meta.name):
        errors.append(f"metadata.name: {problem}")
    if problem := validation.dns1123_label(meta.namespace):
        errors.append(f"metadata.namespace: {problem}")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InvalidResource([*errors, "spec: required"])
    class_name = spec.get("ingressClassName")
    if class_name is None:
        class_name = meta.annotations.get(LEGACY_CLASS_ANNOTATION)
    elif not isinstance(class_name, str):
        errors.append("spec.ingressClassName: must be a string")
    default_backend = None
    if spec.get("defaultBackend") is not None:
        default_backend = _backend(spec["defaultBackend"], "spec.defaultBackend", errors)
    kind = meta.annotations.get(nginx_org.MERGEABLE)
    if kind is None and translated.paths.aliases:
        aliased = with_aliases(spec, translated.paths.aliases)
        assert isinstance(aliased, Mapping)
        spec = aliased
    if kind is None and translated.paths.www:
        redirected = with_www(spec, translated.paths.www)
        assert isinstance(redirected, Mapping)
        spec = redirected
    if kind == "master":
        # A master has no paths: its rule carries the host (and TLS) only.
        spec = {**spec, "rules": [_host_only(r) for r in spec.get("rules") or []]}
    regex = meta.annotations.get(nginx_org.PATH_REGEX) in ("case_sensitive", "case_insensitive")
    plain: list[str] = []
    rules = _rules(spec.get("rules"), plain, regex) if canary is not None else []
    if canary is None or plain:
        # A canary's path only names the main's path it joins (ingress-nginx's
        # use-regex is the host's: the main's makes its regex path a location),
        # so one that is no plain path is read as a regex path is; it never
        # becomes a location of its own.
        rules = _rules(spec.get("rules"), errors, regex or canary is not None)
    tls = _tls(spec.get("tls"), errors)
    if canary is not None and tls:
        # ingress-nginx builds no server from a canary: the main's TLS serves its host.
        canary_warnings.append("spec.tls ignored on a canary Ingress: the main Ingress's applies")
    services = frozenset(b.service for b in _services(rules, default_backend))
    hostless = any(not r.host for r in rules)
    parsed, problems, warnings = nginx_org.validate(meta.annotations, services, hostless)
    errors.extend(str(p) for p in problems)
    if kind in ("master", "minion"):
        _mergeable(obj["spec"], kind, errors)
    balancing = _balancing(parsed)
    if not rules and spec.get("defaultBackend") is None and not errors and kind != "master":
        errors.append("spec: either defaultBackend or rules must be specified")
    if errors:
        raise InvalidResource(errors)
    return Ingress(
        meta=meta,
        class_name=class_name,
        default_backend=default_backend,
        rules=tuple(rules),
        tls=tuple(tls),
        balancing=balancing,
        warnings=(*translated.warnings, *canary_warnings, *warnings),
        policies=policy_refs(meta.annotations.get(POLICIES_ANNOTATION, ""), meta.namespace),
        mergeable=kind if kind in ("master", "minion") else None,
        annotation_policies=tuple(translated.policies),
        paths=translated.paths,
        canary=canary,
        client_limits=translated.limits,
        fallback_service=translated.fallback,
        error_codes=translated.error_codes,
        request_streamed=translated.streamed,
        ssl_passthrough=translated.passthrough,
        samesite_none_conditional=translated.samesite_none_conditional,
    )


def _host_only(rule: object) -> object:
    """A master's rule without its (refused) http part, so its host parses alone."""
    if isinstance(rule, Mapping):
        return {k: v for k, v in rule.items() if k != "http"}
    return rule


def _services(rules: list[Rule], default: ServiceBackend | None) -> set[ServiceBackend]:
    found = {p.backend for r in rules for p in r.paths}
    if default is not None:
        found.add(default)
    return found


POLICIES_ANNOTATION = "nginx.org/policies"


def policy_refs(value: str, namespace: str) -> tuple[PolicyRef, ...]:
    """NIC's reading of ``nginx.org/policies``: comma-separated ``[namespace/]name``,
    a name without namespace in the Ingress's, each Policy once, in order."""
    seen: dict[PolicyRef, None] = {}
    for part in value.split(","):
        name = part.strip()
        if not name:
            continue
        ns, _, rest = name.rpartition("/")
        seen.setdefault(PolicyRef(rest, ns or namespace), None)
    return tuple(seen)
