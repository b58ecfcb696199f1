"""ingress-nginx annotation values read and turned into nginx.org's: one
function per annotation (or group), each raising Unusable with the form
expected; ``ingress_nginx.ENTRIES`` says which serves which."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from ferryman.kinds.ingress.parse import ingress_nginx_paths as path_rules
from ferryman.kinds.ingress.parse import proxy_redirect

PREFIX = "nginx.ingress.kubernetes.io/"
NGINX_ORG = "nginx.org/"


class Unusable(ValueError):
    """An ingress-nginx value that cannot be applied; the message says the form expected."""


# The Ingress's annotations (all of them, to read related ones) and the names of
# the Services it routes to -> nginx.org annotations to set.
Convert = Callable[[Mapping[str, str], frozenset[str]], dict[str, str]]


def value(annotations: Mapping[str, str], key: str) -> str:
    return annotations[PREFIX + key].strip()


_SECONDS = re.compile(r"[0-9]{1,9}")
_SIZE = re.compile(r"[0-9]{1,12}[kKmMgG]?")


def seconds(annotations: Mapping[str, str], key: str) -> str:
    v = value(annotations, key)
    if not _SECONDS.fullmatch(v):
        raise Unusable("must be a whole number of seconds")
    return f"{int(v)}s"


def nginx_size(annotations: Mapping[str, str], key: str) -> str:
    v = value(annotations, key)
    if not _SIZE.fullmatch(v):
        raise Unusable("must be a size (a number, optionally followed by k, m or g)")
    return v


def count(annotations: Mapping[str, str], key: str) -> int:
    v = value(annotations, key)
    if not _SECONDS.fullmatch(v):
        raise Unusable("must be a whole number")
    return int(v)


def flag(annotations: Mapping[str, str], key: str) -> bool:
    v = value(annotations, key).lower()
    if v not in ("true", "false"):
        raise Unusable('must be "true" or "false"')
    return v == "true"


def on_off(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    v = value(a, "proxy-buffering").lower()
    if v not in ("on", "off"):
        raise Unusable('must be "on" or "off"')
    return {"proxy-buffering": "true" if v == "on" else "false"}


def buffers(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    # ingress-nginx writes proxy_buffer_size <size> and proxy_buffers <number> <size>.
    size = nginx_size(a, "proxy-buffer-size") if PREFIX + "proxy-buffer-size" in a else "4k"
    number = count(a, "proxy-buffers-number") if PREFIX + "proxy-buffers-number" in a else 4
    if number < 2:
        raise Unusable("must be at least 2 (NGINX's proxy_buffers)")
    out = {"proxy-buffers": f"{number} {size}"}
    if PREFIX + "proxy-buffer-size" in a:
        out["proxy-buffer-size"] = size
    return out


def load_balance(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    v = value(a, "load-balance")
    if v == "round_robin":
        return {"lb-method": "round_robin"}
    if v == "ewma":
        # NGINX has no EWMA balancer; least_conn is the nearest (it too sends
        # less to a slow peer). Said in a Warning: a difference, not a silence.
        raise Differs({"lb-method": "least_conn"}, "ewma is served as least_conn")
    raise Unusable('must be "round_robin" or "ewma"')


_HASH_KEY = re.compile(r"[A-Za-z0-9_$\-]+")


def hash_by(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    v = value(a, "upstream-hash-by")
    if not _HASH_KEY.fullmatch(v):
        raise Unusable("must be NGINX variables and text (letters, digits, _, -, $)")
    # ingress-nginx's hash is consistent (a ring): so is NGINX's with "consistent".
    return {"lb-method": f"hash {v} consistent"}


def service_upstream(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    return {"use-cluster-ip": "true" if flag(a, "service-upstream") else "false"}


def regex(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    if PREFIX + "use-regex" in a and value(a, "use-regex").lower() not in ("true", "false"):
        raise Unusable('must be "true" or "false"')
    # ingress-nginx's location ~* "^<path>": NIC's case_insensitive.
    return {"path-regex": "case_insensitive"} if path_rules.regex(a) else {}


def ssl_redirect(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    return {"ssl-redirect": "true" if flag(a, "ssl-redirect") else "false"}


def redirect(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    """proxy_redirect <from> <to>: ingress-nginx writes it when both are set
    (or from is off/default)."""
    source = value(a, "proxy-redirect-from")
    if source in proxy_redirect.KEYWORDS:
        return {"proxy-redirect-from": source}
    if PREFIX + "proxy-redirect-to" not in a:
        raise Unusable("needs proxy-redirect-to too")
    out = {"proxy-redirect-from": source, "proxy-redirect-to": value(a, "proxy-redirect-to")}
    if (
        problem := proxy_redirect.pair_problem({NGINX_ORG + k: v for k, v in out.items()})
    ) is not None:
        raise Unusable(problem.detail)
    return out


_SECRET_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def basic_auth(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    """auth-type basic as NIC's basic-auth-secret: the Secret must be NIC's
    (type nginx.org/htpasswd, key htpasswd), in the Ingress's namespace."""
    kind = value(a, "auth-type")
    if kind != "basic":
        raise Unusable('ferryman serves "basic" (not digest)')
    if PREFIX + "auth-secret" not in a:
        raise Unusable(f"needs {PREFIX}auth-secret")
    secret = value(a, "auth-secret")
    if "/" in secret:
        raise Unusable(
            f"auth-secret {secret!r}: ferryman reads the Secret in the Ingress's namespace only "
            "(name it without a namespace)"
        )
    if not _SECRET_NAME.fullmatch(secret):
        raise Unusable(f"auth-secret {secret!r} is not a Secret name")
    if PREFIX + "auth-secret-type" in a and value(a, "auth-secret-type") != "auth-file":
        raise Unusable(
            "auth-secret-type auth-map is not read: write the users into a Secret of type "
            "nginx.org/htpasswd (key htpasswd)"
        )
    out = {"basic-auth-secret": secret}
    if PREFIX + "auth-realm" in a:
        realm = value(a, "auth-realm")
        if not HEADER_VALUE.fullmatch(realm):
            raise Unusable(f"auth-realm {realm!r} has characters a realm cannot")
        out["basic-auth-realm"] = realm
    return out


def backend_protocol(a: Mapping[str, str], services: frozenset[str]) -> dict[str, str]:
    v = value(a, "backend-protocol").upper()
    names = ",".join(sorted(services))
    if v == "HTTP":
        return {}
    if not names:
        return {}
    if v == "HTTPS":
        return {"ssl-services": names}
    if v == "GRPC":
        return {"grpc-services": names}
    if v == "GRPCS":
        return {"grpc-services": names, "ssl-services": names}
    raise Unusable('ferryman serves "HTTP", "HTTPS", "GRPC" and "GRPCS" (not AUTO_HTTP or FCGI)')


HEADER_VALUE = re.compile(r"[^\x00-\x1f\x7f,\"$\\]*")


def header(name: str, key: str) -> Convert:
    def convert(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
        v = value(a, key)
        if not v or not HEADER_VALUE.fullmatch(v):
            raise Unusable('must be text without control characters, ",", \'"\', "$" or "\\"')
        return {"proxy-set-headers": f"{name}: {v}"}

    return convert


def limits(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    """limit-rps/limit-rpm as NIC's limit-req: per client address, a burst of
    rate x limit-burst-multiplier (default 5) served without delay, 503 past
    it (ingress-nginx's limit-req-status-code)."""
    if PREFIX + "limit-rps" in a:
        rate, unit = count(a, "limit-rps"), "r/s"
    else:
        rate, unit = count(a, "limit-rpm"), "r/m"
    multiplier = 5
    if PREFIX + "limit-burst-multiplier" in a:
        multiplier = count(a, "limit-burst-multiplier")
    if rate == 0:
        return {}
    return {
        "limit-req-rate": f"{rate}{unit}",
        "limit-req-burst": str(rate * multiplier),
        "limit-req-no-delay": "true",
        "limit-req-reject-code": "503",
        "limit-req-key": "${binary_remote_addr}",
    }


def http_version(a: Mapping[str, str], _s: frozenset[str]) -> dict[str, str]:
    """proxy_http_version: ferryman proxies HTTP/1.1 to every upstream (its kept
    connections need it), which is ingress-nginx's default."""
    v = value(a, "proxy-http-version")
    if v == "1.1":
        return {}
    if v == "1.0":
        raise Unusable("is not served: ferryman proxies HTTP/1.1 (ingress-nginx's default)")
    raise Unusable('must be "1.0" or "1.1"')


def request_streamed(a: Mapping[str, str], warnings: list[str]) -> bool:
    """proxy_request_buffering off (the body proxied as it arrives); on is
    NGINX's and ingress-nginx's default. Another value: a Warning, the default."""
    raw = a.get(PREFIX + "proxy-request-buffering")
    if raw is None or raw.strip().lower() == "on":
        return False
    if raw.strip().lower() == "off":
        return True
    warnings.append(
        f'annotation {PREFIX}proxy-request-buffering: {raw!r} must be "on" or "off": not applied'
    )
    return False


_COOKIE_NAME = re.compile(r"[A-Za-z0-9!#%&'*+\-.^_`|~]+")
_COOKIE_TEXT = re.compile(r"[A-Za-z0-9._~/\-]+")


def affinity(a: Mapping[str, str], services: frozenset[str]) -> dict[str, str]:
    """affinity: cookie as NGINX's sticky cookie on every Service of the Ingress."""
    if value(a, "affinity") != "cookie":
        raise Unusable('ferryman serves "cookie"')
    name = a.get(PREFIX + "session-cookie-name", "INGRESSCOOKIE").strip()
    if not _COOKIE_NAME.fullmatch(name):
        raise Unusable(f"session-cookie-name {name!r} is not a cookie name")
    params = [name]
    for key in ("session-cookie-max-age", "session-cookie-expires"):
        if PREFIX + key in a:
            params.append(f"expires={count(a, key)}s")
            break
    for key, param in (("session-cookie-domain", "domain"), ("session-cookie-path", "path")):
        if PREFIX + key in a:
            v = value(a, key)
            if not _COOKIE_TEXT.fullmatch(v):
                raise Unusable(f"{key} {v!r} has characters a cookie attribute cannot")
            params.append(f"{param}={v}")
    if PREFIX + "session-cookie-samesite" in a:
        v = value(a, "session-cookie-samesite").lower()
        if v not in ("strict", "lax", "none"):
            raise Unusable('session-cookie-samesite must be "Strict", "Lax" or "None"')
        params.append(f"samesite={v}")
    if PREFIX + "session-cookie-secure" in a and flag(a, "session-cookie-secure"):
        params.append("secure")
    # ingress-nginx's affinity cookie is always HttpOnly.
    params.append("httponly")
    joined = " ".join(params)
    return {
        "sticky-cookie-services": ";".join(f"serviceName={s} {joined}" for s in sorted(services))
    }


def affinity_extras(a: Mapping[str, str], warnings: list[str]) -> bool:
    """session-cookie-conditional-samesite-none (returned) and what ferryman
    says of session-cookie-change-on-failure, with affinity: cookie."""
    if a.get(PREFIX + "affinity", "").strip() != "cookie":
        return False
    change = a.get(PREFIX + "session-cookie-change-on-failure")
    if change is not None and change.strip().lower() != "true":
        # NGINX's sticky never sends a retry to the peer that failed.
        warnings.append(
            f"annotation {PREFIX}session-cookie-change-on-failure: {change!r} is not applied: "
            "ferryman retries a failed request on another peer and sets the cookie to it (true)"
        )
    raw = a.get(PREFIX + "session-cookie-conditional-samesite-none")
    if raw is None:
        return False
    if raw.strip().lower() not in ("true", "false"):
        warnings.append(
            f"annotation {PREFIX}session-cookie-conditional-samesite-none: {raw!r} is not "
            "true or false: false"
        )
    return raw.strip().lower() == "true"


class Differs(Exception):
    """Applied, with a difference a Warning says."""

    def __init__(self, result: dict[str, str], difference: str) -> None:
        super().__init__(difference)
        self.result = result


def raw_services(spec: object) -> frozenset[str]:
    """The names of the Services an Ingress spec routes to, read before it is
    validated (backend-protocol and affinity apply to each)."""
    found: set[str] = set()

    def backend(b: object) -> None:
        svc = b.get("service") if isinstance(b, Mapping) else None
        name = svc.get("name") if isinstance(svc, Mapping) else None
        if isinstance(name, str) and name:
            found.add(name)

    if not isinstance(spec, Mapping):
        return frozenset()
    backend(spec.get("defaultBackend"))
    for rule in spec.get("rules") or []:
        http = rule.get("http") if isinstance(rule, Mapping) else None
        for p in (http.get("paths") if isinstance(http, Mapping) else None) or []:
            if isinstance(p, Mapping):
                backend(p.get("backend"))
    return frozenset(found)


# The table rows of docs/ingress-nginx.md (ingress_nginx.ENTRIES).
AFFINITY_NOTE = (
    "cookie, as nginx.org/sticky-cookie-services for every Service of the Ingress "
    "(NGINX's sticky cookie: HttpOnly, path, domain, samesite, secure, expires); "
    "session-cookie-conditional-samesite-none leaves SameSite=None out for the clients "
    "Chromium lists as rejecting it or reading it as Strict (Chrome/Chromium 51-66, UC "
    "Browser before 12.13.2, iOS 12, Safari and web views of macOS 10.14)"
)
AFFINITY_READS = (
    "session-cookie-name",
    "session-cookie-path",
    "session-cookie-domain",
    "session-cookie-samesite",
    "session-cookie-secure",
    "session-cookie-expires",
    "session-cookie-max-age",
    "session-cookie-conditional-samesite-none",
)
CHANGE_ON_FAILURE_NOTE = (
    "true is served: a request whose peer failed is retried on another (never the one "
    "that failed, as NGINX's sticky) and the cookie is set to the peer that answered; "
    "false, ingress-nginx's default (the retry to the cookie's peer again), is not, said "
    "in a Warning when set"
)
