"""ingress-nginx's affinity settings beyond NGINX's sticky cookie, as read."""

from __future__ import annotations

from ferryman.configs.sticky_field import sticky_field
from ferryman.kinds.ingress.parse.ingress_nginx import translate
from ferryman.resources.sticky_cookie import StickyCookie

P = "nginx.ingress.kubernetes.io/"
BACKEND = {"service": {"name": "app", "port": {"number": 80}}}
PATH = {"path": "/", "pathType": "Prefix", "backend": BACKEND}
SPEC = {"rules": [{"host": "a.test", "http": {"paths": [PATH]}}]}


def test_conditional_samesite_none_reaches_the_cookie_field() -> None:
    t = translate(
        {P + "affinity": "cookie", P + "session-cookie-conditional-samesite-none": "true"}, SPEC
    )
    assert t.samesite_none_conditional and not t.warnings and not t.problems
    field = sticky_field(StickyCookie("route", samesite="none", samesite_none_conditional=True))
    assert field.endswith("~c")
    assert not sticky_field(StickyCookie("route")).endswith("c")
    # Without affinity: nothing to apply it to.
    t = translate({P + "session-cookie-conditional-samesite-none": "true"}, SPEC)
    assert not t.samesite_none_conditional
    t = translate(
        {P + "affinity": "cookie", P + "session-cookie-conditional-samesite-none": "yes"}, SPEC
    )
    assert not t.samesite_none_conditional and any("yes" in w for w in t.warnings)


def test_change_on_failure_false_is_said_true_is_served() -> None:
    t = translate({P + "affinity": "cookie", P + "session-cookie-change-on-failure": "true"}, SPEC)
    assert not t.warnings
    t = translate({P + "affinity": "cookie", P + "session-cookie-change-on-failure": "false"}, SPEC)
    assert any("change-on-failure: 'false' is not applied" in w for w in t.warnings)
