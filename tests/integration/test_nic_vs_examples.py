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
