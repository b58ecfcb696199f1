"""ferryman_jwt.lua inside a real NGINX, with the libcrypto NGINX links: every
algorithm family, expiry, kid, the token's place, and auth_jwt's 401 answers.
The key sets are the records ferryman pushes (resources/secret_jwk.py)."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.resources.secret_jwk import ALGORITHMS, parse_jwk_secret
from testkit.harness import free_port
from testkit.jose import jwk, jwk_secret, jwks, token
from testkit.lua_nginx import running

# The http block (lua_nginx.nginx_conf has the rest).
HTTP = """
    lua_shared_dict keys 1m;
    server {{
        listen 127.0.0.1:{port};
        # POST a key set record; it is then the one /verify and /enforce use.
        location = /keys {{
            content_by_lua_block {{
                ngx.req.read_body()
                ngx.shared.keys:set("J", ngx.req.get_body_data() or "")
                ngx.say("ok")
            }}
        }}
        # POST "<now>\\n<token>": "ok" or why not.
        location = /verify {{
            content_by_lua_block {{
                local jwt = require("ferryman_jwt")
                ngx.req.read_body()
                local now, t = string.match(ngx.req.get_body_data(), "^(%d+)\\n(.*)$")
                -- As a route's P item has them: the key set (and the tokens it
                -- verified) kept while the record is the same.
                local record = ngx.encode_base64(ngx.shared.keys:get("J"))
                local keys = jwt.decode({{ "", "", record }}).keys
                local ok, why = jwt.verify(t, keys, tonumber(now))
                ngx.say(ok and "ok" or why)
            }}
        }}
        location /enforce {{
            access_by_lua_block {{
                local jwt = require("ferryman_jwt")
                local raw = ngx.shared.keys:get("J") or ""
                local config = jwt.decode({{
                    ngx.encode_base64("My API"),
                    ngx.encode_base64(ngx.var.arg_from or ""),
                    ngx.encode_base64(raw),
                }})
                local code = jwt.check(config)
                if code then
                    return ngx.exit(code)
                end
            }}
            content_by_lua_block {{ ngx.say("passed") }}
        }}
    }}"""


@dataclass
class LuaNginx:
    port: int

    def post(self, path: str, body: str) -> str:
        url = f"http://127.0.0.1:{self.port}{path}"
        with urllib.request.urlopen(urllib.request.Request(url, body.encode())) as r:
            return str(r.read().decode().strip())

    def keys(self, *keys: dict[str, object]) -> None:
        self.post("/keys", parse_jwk_secret(jwk_secret("k", jwks(*keys))).record())

    def verify(self, t: str, now: float | None = None) -> str:
        return self.post("/verify", f"{int(now or time.time())}\n{t}")

    def enforce(self, headers: dict[str, str], query: str = "") -> tuple[int, dict[str, str], str]:
        url = f"http://127.0.0.1:{self.port}/enforce{query}"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()


@pytest.fixture(scope="module")
def lua_nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LuaNginx]:
    tmp_path = tmp_path_factory.mktemp("jwt")
    port = free_port()
    n = LuaNginx(port)
    with running(tmp_path, HTTP.format(port=port), lambda: n.post("/keys", "")):
        yield n


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_each_algorithm_verifies_its_signature_only(lua_nginx: LuaNginx, alg: str) -> None:
    lua_nginx.keys(jwk(alg))
    assert lua_nginx.verify(token(alg, {"sub": "a"})) == "ok"
    other = token(alg, {"sub": "a"}, seed="other")
    assert lua_nginx.verify(other) == "no key verifies the signature"
    good = token(alg, {"sub": "a"})
    head, _, sig = good.split(".")
    forged = token(alg, {"sub": "b"}).split(".")[1]
    assert lua_nginx.verify(f"{head}.{forged}.{sig}") == "no key verifies the signature"


def test_expiry_and_not_before_against_the_clock(lua_nginx: LuaNginx) -> None:
    lua_nginx.keys(jwk("HS256"))
    now = 1_800_000_000
    assert lua_nginx.verify(token("HS256", {"exp": now + 1}), now) == "ok"
    assert lua_nginx.verify(token("HS256", {"exp": now}), now) == "expired"
    assert lua_nginx.verify(token("HS256", {"exp": "soon"}), now) == "expired"
    assert lua_nginx.verify(token("HS256", {"nbf": now + 1}), now) == "not yet valid"
    assert lua_nginx.verify(token("HS256", {"nbf": now, "exp": now + 60}), now) == "ok"
    # A token verified once (its signature remembered) still expires.
    t = token("HS256", {"exp": now + 10})
    assert lua_nginx.verify(t, now) == "ok"
    assert lua_nginx.verify(t, now + 10) == "expired"


def test_kid_selects_the_key_and_alg_must_fit_it(lua_nginx: LuaNginx) -> None:
    lua_nginx.keys(jwk("RS256", "one"), jwk("ES256", "two"), jwk("HS256", "three"))
    assert lua_nginx.verify(token("RS256", {}, kid="one")) == "ok"
    assert lua_nginx.verify(token("ES256", {}, kid="two")) == "ok"
    assert lua_nginx.verify(token("RS256", {})) == "ok"  # no kid: any key of the kind
    assert lua_nginx.verify(token("RS256", {}, kid="two")) == "no key verifies the signature"
    assert lua_nginx.verify(token("RS256", {}, kid="nine")) == "no key verifies the signature"
    # An HMAC token signed with the RSA key's public PEM (the classic confusion)
    # finds no key: RSA keys verify RS*/PS* only.
    assert lua_nginx.verify(token("HS256", {}, kid="one", key=b"pem")) == (
        "no key verifies the signature"
    )


@pytest.mark.parametrize(
    ("t", "why"),
    [
        ("abc", "not a signed JWT (three parts)"),
        ("a.b.c.d.e", "not a signed JWT (three parts)"),
        ("e30.e30.", "algorithm not supported"),
        ("eyJhbGciOiJub25lIn0.e30.", "algorithm not supported"),  # alg none
        ("!!.e30.e30", "malformed"),
        ("eyJhbGciOiJIUzI1NiJ9.W10.e30", "malformed"),  # claims an array
        ("eyJhbGciOiJIUzI1NiIsImNyaXQiOlsieCJdfQ.e30.e30", "critical header"),
    ],
)
def test_malformed_tokens_are_refused(lua_nginx: LuaNginx, t: str, why: str) -> None:
    lua_nginx.keys(jwk("HS256"))
    assert why in lua_nginx.verify(t)


def test_answers_as_auth_jwt(lua_nginx: LuaNginx) -> None:
    lua_nginx.keys(jwk("ES256"))
    good = token("ES256", {"exp": time.time() + 60})
    status, headers, body = lua_nginx.enforce({})
    assert (status, headers["WWW-Authenticate"]) == (401, 'Bearer realm="My API"')
    assert "<title>401 Authorization Required</title>" in body
    status, headers, _ = lua_nginx.enforce({"Authorization": "Bearer x.y.z"})
    assert (status, headers["WWW-Authenticate"]) == (
        401,
        'Bearer realm="My API",error="invalid_token"',
    )
    expired = token("ES256", {"exp": time.time() - 1})
    assert lua_nginx.enforce({"Authorization": f"Bearer {expired}"})[0] == 401
    assert lua_nginx.enforce({"Authorization": f"Bearer {good}"})[:3:2] == (200, "passed\n")
    assert lua_nginx.enforce({"Authorization": f"bearer  {good}"})[0] == 200
    assert lua_nginx.enforce({"Authorization": f"Basic {good}"})[0] == 401


@pytest.mark.parametrize(
    ("variable", "headers", "query"),
    [
        ("$http_token", {"token": "{t}"}, ""),
        ("$arg_jwt", {}, "&jwt={t}"),
        ("$cookie_auth", {"Cookie": "a=1; auth={t}"}, ""),
    ],
)
def test_token_from_the_policy_variable(
    lua_nginx: LuaNginx, variable: str, headers: dict[str, str], query: str
) -> None:
    lua_nginx.keys(jwk("HS512"))
    good = token("HS512", {})
    filled = {k: v.format(t=good) for k, v in headers.items()}
    assert lua_nginx.enforce(filled, f"?from={variable}{query.format(t=good)}")[0] == 200
    # The Authorization header is not read when the policy names a variable.
    other = {"Authorization": f"Bearer {good}"}
    assert lua_nginx.enforce(other, f"?from={variable}")[0] == 401


def test_unusable_key_set_answers_500(lua_nginx: LuaNginx) -> None:
    lua_nginx.post("/keys", "-:RS256:" + "QUJD")  # "ABC" is no PEM key
    assert lua_nginx.enforce({"Authorization": "Bearer a.b.c"})[0] == 500


@settings(max_examples=60, deadline=None)
@given(kid=st.text(min_size=1, max_size=20))
def test_any_kid_is_read_as_json_escapes_it(lua_nginx: LuaNginx, kid: str) -> None:
    """The header's JSON (\\u escapes, surrogate pairs for characters beyond the
    BMP) decodes to the kid the key set names."""
    kid = kid.encode("utf-8", "replace").decode()
    lua_nginx.keys(jwk("HS256", "decoy"), jwk("HS256", kid, seed="k"))
    assert lua_nginx.verify(token("HS256", {"n": [1, {"a": None}]}, kid=kid, seed="k")) == "ok"


def _part(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    header=_json_values | st.fixed_dictionaries({"alg": st.sampled_from(["HS256", "ES256", "x"])}),
    claims=_json_values,
    signature=st.binary(max_size=80),
    raw=st.text(max_size=60),
)
def test_any_token_is_refused_with_a_reason_never_an_error(
    lua_nginx: LuaNginx, header: object, claims: object, signature: bytes, raw: str
) -> None:
    """Whatever a client sends (JSON of any shape, any bytes, any text) the reader
    answers with a reason; a Lua error would be NGINX's 500."""
    lua_nginx.keys(jwk("HS256"), jwk("ES256"))
    crafted = ".".join(
        [_part(json.dumps(header).encode()), _part(json.dumps(claims).encode()), _part(signature)]
    )
    for t in (crafted, raw.replace("\n", "")):
        why = lua_nginx.verify(t)
        assert why != "ok" and why in REASONS, why


REASONS = {
    "token too long",
    "not a signed JWT (three parts)",
    "malformed",
    "algorithm not supported",
    "critical header parameters are not supported",
    "kid is not a string",
    "no key verifies the signature",
}
