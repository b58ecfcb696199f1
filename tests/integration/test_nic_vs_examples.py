"""NIC's own VirtualServer examples (../shared/vendor/nic-examples-v5.5.4), applied
unchanged, behave as their READMEs say, through real NGINX with no reload."""

from __future__ import annotations

import re

import yaml

from testkit.harness import (
    Backends,
    Ferryman,
    served_by,
    service_with_backends,
    tls_secret,
)
from testkit.nic_fixtures import NIC_EXAMPLES
from testkit.sticky import assert_cafe_sessions


def _example(ferryman: Ferryman, folder: str, name: str) -> None:
    ferryman.write_text(f"{folder}-{name}", (NIC_EXAMPLES / folder / name).read_text())


def test_basic_configuration(ferryman: Ferryman, backends: Backends) -> None:
    """README: https://cafe.example.com/tea and /coffee reach the tea and coffee pods."""
    ferryman.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    ferryman.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    ferryman.write("secret", tls_secret("tls-secret", ["cafe.example.com"]))
    _example(ferryman, "basic-configuration", "cafe-virtual-server.yaml")
    ferryman.start()
    assert ferryman.get("cafe.example.com", "/tea", https=True).served_by == "tea"
    assert ferryman.get("cafe.example.com", "/coffee", https=True).served_by == "coffee"
    event = ferryman.events_for("cafe")[-1]
    assert (event["reason"], event["message"]) == (
        "AddedOrUpdated",
        "Configuration for default/cafe was added or updated ",
    )
    assert ferryman.reloads() == 1


def test_traffic_splitting(ferryman: Ferryman, backends: Backends) -> None:
    """README: 90% of /coffee goes to coffee-v1-svc, 10% to coffee-v2-svc."""
    ferryman.write("v1", service_with_backends("coffee-v1-svc", [backends.start("v1")]))
    ferryman.write("v2", service_with_backends("coffee-v2-svc", [backends.start("v2")]))
    _example(ferryman, "traffic-splitting", "cafe-virtual-server.yaml")
    ferryman.start()
    answers = [served_by(ferryman, "cafe.example.com", "/coffee") for _ in range(400)]
    assert set(answers) == {"v1", "v2"}
    # Binomial(400, 0.1): mean 40, sd 6; five sd either side.
    assert 10 <= answers.count("v2") <= 70, answers.count("v2")


def test_rewrites(ferryman: Ferryman, backends: Backends) -> None:
    """README: the URIs each service receives, for the prefix and the regex examples."""
    readme = (NIC_EXAMPLES / "rewrites" / "README.md").read_text()
    prefix, regex = re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL)
    regex_vs = yaml.safe_load(regex)
    regex_vs["metadata"]["name"] = "cafe-regex"
    regex_vs["spec"]["host"] = "regex.example.com"
    ferryman.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    ferryman.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    ferryman.write_text("prefix.yaml", prefix)
    ferryman.write("regex", regex_vs)
    ferryman.start()

    def sent(host: str, p: str) -> str:
        return str(ferryman.get(host, p).json()["path"])

    r = ferryman.get("cafe.example.com", "/tea")
    assert r.status == 301 and r.headers["location"].endswith("/tea/")
    for request, upstream in {"/tea/": "/", "/tea/abc": "/abc"}.items():
        assert sent("cafe.example.com", request) == upstream
    for request, upstream in {
        "/coffee": "/beans",
        "/coffee/": "/beans/",
        "/coffee/abc": "/beans/abc",
    }.items():
        assert sent("cafe.example.com", request) == upstream
    for request, upstream in {"/tea": "/", "/tea/": "/", "/tea/abc": "/abc"}.items():
        assert sent("regex.example.com", request) == upstream


def test_session_persistence(ferryman: Ferryman, backends: Backends) -> None:
    """README (sessionCookie, NGINX's sticky cookie, open-source NGINX since 1.29.6):
    the first answer sets srv_id naming the pod that served it (expires 2h, path
    /tea for tea; 1h, /coffee for coffee); a request with the cookie goes to that
    pod every time; without it, requests are balanced as usual; no reload."""
    f = ferryman
    f.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    f.write("tea2", service_with_backends("tea-svc", [backends.start("tea2")])[1:])
    f.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    _example(f, "session-persistence", "cafe-vs-with-session-cookie.yml")
    f.start()
    assert f.events_for("cafe")[-1]["reason"] == "AddedOrUpdated"
    assert_cafe_sessions(f, "cafe.example.com")
    assert f.reloads() == 1


def test_session_cookie_disabled_or_invalid(ferryman: Ferryman, backends: Backends) -> None:
    """``enable: false`` sets no cookie (NIC writes no sticky directive then); an
    invalid cookie name rejects the VirtualServer with NIC's field error."""
    f = ferryman
    f.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    vs = yaml.safe_load(
        (NIC_EXAMPLES / "session-persistence" / "cafe-vs-with-session-cookie.yml").read_text()
    )
    off = yaml.safe_load(yaml.safe_dump(vs))
    off["metadata"]["name"], off["spec"]["host"] = "off", "off.example.com"
    off["spec"]["upstreams"][0]["sessionCookie"]["enable"] = False
    bad = yaml.safe_load(yaml.safe_dump(vs))
    bad["metadata"]["name"], bad["spec"]["host"] = "bad", "bad.example.com"
    bad["spec"]["upstreams"][0]["sessionCookie"]["name"] = "srv id"
    f.write("off", off)
    f.write("bad", bad)
    f.start()
    r = f.get("off.example.com", "/tea")
    assert r.served_by == "tea" and "set-cookie" not in r.headers
    event = f.events_for("bad")[-1]
    assert (event["type"], event["reason"]) == ("Warning", "Rejected"), event
    assert 'spec.upstreams[0].sessionCookie.name: Invalid value: "srv id"' in event["message"]
    assert f.get("bad.example.com", "/tea").status == 404
