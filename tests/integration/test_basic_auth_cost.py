"""A tenant's htpasswd hash whose cost would stall the NGINX worker is refused
with a Warning, the rest of the file still served (issue 27, defect 6)."""

from __future__ import annotations

import base64
import ctypes
import time

from testkit.annotated_ingress import HOST, annotated, last, start
from testkit.harness import Backends, Ferryman
from testkit.virtualservers import start_with_backends, to, vs
from testkit.vs_policies import last_event, libc_hash, policy, refs, secret

_libcrypt = ctypes.CDLL("libcrypt.so.1")
_libcrypt.crypt.restype = ctypes.c_char_p
_libcrypt.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_a_costly_hash_is_refused_and_the_other_users_served(
    ferryman: Ferryman, backends: Backends
) -> None:
    # The real hash of the real password: before the bound, NGINX computed it
    # (1.4 s here) and served the request.
    slow = _libcrypt.crypt(b"pw-slow", b"$6$rounds=8000000$saltsaltsalt").decode()
    text = f"slow:{slow}\nfast:{libc_hash('pw-fast', '$6$')}\n"
    start_with_backends(
        ferryman,
        backends,
        secret("users", "nginx.org/htpasswd", {"htpasswd": text.encode()}),
        policy("auth", basicAuth={"secret": "users", "realm": "Cafe"}),
        vs("cafe", "cafe.test", [{"path": "/", "action": to("a")}], policies=refs("auth")),
    )
    assert ferryman.get("cafe.test", "/", headers=basic("fast", "pw-fast")).served_by == "a"
    began = time.monotonic()
    r = ferryman.get("cafe.test", "/", headers=basic("slow", "pw-slow"))
    took = time.monotonic() - began
    assert r.status == 401
    assert took < 1.0, took  # no 8,000,000-round check (1.4 s alone) ran in the worker
    event = last_event(ferryman, "cafe")
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert (
        "Basic Auth policy default/auth secret default/users: htpasswd line 1 (user 'slow') "
        "refused: sha-crypt rounds 8000000 are above 100,000"
    ) in event["message"]


def test_a_file_of_costly_hashes_only_is_an_invalid_secret(
    ferryman: Ferryman, backends: Backends
) -> None:
    text = "a:$2b$31$ft4CcfyFuF0RZWFr8aedxeVI9lxqVUy7H300Vr5ROgXUD.tKJGaHW\n"
    start_with_backends(
        ferryman,
        backends,
        secret("users", "nginx.org/htpasswd", {"htpasswd": text.encode()}),
        policy("auth", basicAuth={"secret": "users"}),
        vs("cafe", "cafe.test", [{"path": "/", "action": to("a")}], policies=refs("auth")),
    )
    assert ferryman.get("cafe.test", "/", headers=basic("a", "x")).status == 500
    message = last_event(ferryman, "cafe")["message"]
    assert (
        "Basic Auth policy default/auth references an invalid secret default/users: "
        "no usable htpasswd line: line 1 (user 'a') refused: bcrypt cost 31 is above 12"
    ) in message


def test_the_basic_auth_annotation_refuses_a_costly_hash_too(
    ferryman: Ferryman, backends: Backends
) -> None:
    text = "slow:$2y$31$ft4CcfyFuF0RZWFr8aedxeVI9lxqVUy7H300Vr5ROgXUD.tKJGaHW\nfast:{PLAIN}p\n"
    start(
        ferryman,
        backends,
        secret("passwd", "nginx.org/htpasswd", {"htpasswd": text.encode()}),
        annotated({"nginx.org/basic-auth-secret": "passwd"}),
    )
    assert ferryman.get(HOST, "/", headers=basic("fast", "p")).served_by == "a"
    assert ferryman.get(HOST, "/", headers=basic("slow", "x")).status == 401
    event = last(ferryman)
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert (
        "basic auth secret default/passwd: htpasswd line 1 (user 'slow') refused: "
        "bcrypt cost 31 is above 12"
    ) in event["message"]
