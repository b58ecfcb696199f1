"""VirtualServers on GlobalConfiguration HTTP listeners: the listen lines and
the map (configs/http_listeners.py), the H record's listener suffix, NIC's
checks of ``spec.listener`` and the controller re-rendering a VirtualServer
when the GlobalConfiguration changes."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.http_listeners import (
    HTTP_LISTENERS_FILE,
    LISTENER_MAP_FILE,
    listener_files,
    render_listens,
    render_map,
)
from ferryman.configs.model import VirtualHost
from ferryman.configs.render import Renderer
from ferryman.configs.routes import decode_host, decode_listeners, encode_host
from ferryman.engine.settings import TransportSettings
from ferryman.kinds.virtualserver.parse.virtualserver import Listeners, parse_virtual_server
from ferryman.kinds.virtualserver.records.listeners import (
    NO_GLOBAL_CONFIGURATION,
    resolve_listeners,
)
from ferryman.resources.global_configuration import GlobalConfiguration, Listener
from testkit.controller_kit import Kit, _service
from testkit.nginx_check import STATE, assert_nginx_t
from testkit.render import MAIN
from testkit.strategies import dns_labels

LISTENERS = (
    Listener("http-8083", 8083, "HTTP"),
    Listener("https-8443", 8443, "HTTP", ssl=True),
    Listener("dns-tcp", 5353, "TCP"),
    Listener("local", 8084, "HTTP", ipv4="127.0.0.1", ipv6="::1"),
    # Another HTTP listener on 8083 (another address): the map names a listener
    # by its port, so only the first is served.
    Listener("again", 8083, "HTTP", ipv4="127.0.0.2"),
)


def test_http_listeners_become_listen_lines_and_the_map() -> None:
    listens = render_listens(LISTENERS)
    # Each family on its own (NIC): the listener's address, else every address.
    assert listens.splitlines()[1:] == [
        "listen 8083 reuseport;",
        "listen [::]:8083 reuseport ipv6only=on;",
        "listen 127.0.0.1:8084 reuseport;",
        "listen [::1]:8084 reuseport;",
        "listen 8443 ssl reuseport;",
        "listen [::]:8443 ssl reuseport ipv6only=on;",
    ]
    # --disable-ipv6: no IPv6 socket, not even a listener's own address (NIC).
    assert render_listens(LISTENERS, ipv6=False).splitlines()[1:] == [
        "listen 8083 reuseport;",
        "listen 127.0.0.1:8084 reuseport;",
        "listen 8443 ssl reuseport;",
    ]
    assert render_map(LISTENERS).splitlines()[1:] == [
        "map $server_port $ferryman_listener {",
        '    default "";',
        "    8083 http-8083;",
        "    8084 local;",
        "    8443 https-8443;",
        "}",
    ]
    # Without listeners: no listen line, and the variable is still defined.
    assert render_listens(()).count("listen ") == 0
    assert "$ferryman_listener" in render_map(())


def test_the_public_server_includes_them_only_with_a_global_configuration() -> None:
    assert "http-listener" not in Renderer().main(MAIN)
    text = Renderer().main(dataclasses.replace(MAIN, http_listeners=True))
    assert f"include {STATE}/http-listener-map.con[f];" in text
    assert f"include {STATE}/http-listeners.con[f];" in text


@pytest.mark.parametrize("with_listeners", [True, False])
def test_the_configuration_passes_nginx_t(tmp_path: Path, with_listeners: bool) -> None:
    """nginx.conf with the listener files (the module looks the map's variable
    up) loads, and so does one without the map (the module then takes every
    request as the default ports'). With $FERRYMAN_TEST_NGINX_MODULES_DIR set,
    that directory's module is the one loaded."""
    main = Renderer().main(dataclasses.replace(MAIN, http_listeners=with_listeners))
    assert_nginx_t(tmp_path, main, listener_files(LISTENERS) if with_listeners else {})


def test_the_h_record_names_a_hosts_listeners_after_its_redirect() -> None:
    plain = VirtualHost("cafe.test", (), None)
    assert encode_host(plain) == "- 0 - rr:1:10"  # unchanged without listeners
    assert decode_listeners(encode_host(plain)) is None
    both = dataclasses.replace(plain, listeners=("http-8083", "https-8443"), redirect_https=True)
    assert encode_host(both) == "- 1:http-8083:https-8443 - rr:1:10"
    assert decode_host(encode_host(both))[1] is True
    assert decode_listeners(encode_host(both)) == ("http-8083", "https-8443")
    # "-": that scheme is served nowhere ("" would be the default ports).
    only_http = dataclasses.replace(plain, listeners=("http-8083", ""))
    assert encode_host(only_http) == "- 0:http-8083:- - rr:1:10"
    assert decode_listeners(encode_host(only_http)) == ("http-8083", "")
    assert encode_host(dataclasses.replace(plain, listeners=("", ""))) == "- 0:-:- - rr:1:10"


GC = GlobalConfiguration("nginx-ingress", "nginx-configuration", LISTENERS)


@pytest.mark.parametrize(
    ("http", "https", "served", "warning"),
    [
        ("http-8083", "https-8443", ("http-8083", "https-8443"), None),
        ("http-8083", "", ("http-8083", ""), None),
        (
            "https-8443",
            "https-8443",
            ("", "https-8443"),
            "Listener https-8443 can't be use in `listener.http` context as SSL is enabled "
            "for that listener.",
        ),
        (
            "http-8083",
            "http-8083",
            ("http-8083", ""),
            "Listener http-8083 can't be use in `listener.https` context as SSL is not "
            "enabled for that listener.",
        ),
        (
            "nope",
            "https-8443",
            ("", "https-8443"),
            "Listener nope is not defined in GlobalConfiguration",
        ),
        (
            "http-8083",
            "nope",
            ("http-8083", ""),
            "Listener nope is not defined in GlobalConfiguration",
        ),
        # NIC takes only HTTP listeners, and says nothing of a TCP one.
        ("dns-tcp", "", ("", ""), None),
    ],
)
def test_nics_listener_checks(
    http: str, https: str, served: tuple[str, str], warning: str | None
) -> None:
    assert resolve_listeners(Listeners(http, https), GC) == (served, warning)


def test_listeners_without_a_global_configuration_serve_nowhere() -> None:
    assert resolve_listeners(Listeners("a", "b"), None) == (("", ""), NO_GLOBAL_CONFIGURATION)


def _vs(listener: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": "default"},
        "spec": {
            "host": "cafe.test",
            "listener": listener,
            "upstreams": [{"name": "tea", "service": "app", "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "tea"}}],
        },
    }


def test_spec_listener_is_parsed() -> None:
    vs = parse_virtual_server(_vs({"http": "a", "https": "b"})).resource
    assert vs is not None and vs.listener == Listeners("a", "b")
    parsed = parse_virtual_server(_vs("a"))
    assert parsed.resource is None
    assert "spec.listener" in parsed.message()
    assert "must be of type object" in parsed.message()


def _gc(*listeners: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "GlobalConfiguration",
        "metadata": {"name": "nginx-configuration", "namespace": "nginx-ingress"},
        "spec": {"listeners": list(listeners)},
    }


def test_a_global_configuration_change_renders_its_virtual_servers_again(
    tmp_path: Path,
) -> None:
    kit = Kit(
        tmp_path,
        transport=TransportSettings(global_configuration=("nginx-ingress", "nginx-configuration")),
    )
    kit.add(*_service("app", "10.0.0.1"), _vs({"http": "http-8083"}))
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("H", "cafe.test")] == "- 0:-:- - rr:1:10"
    assert kit.messages("cafe")[-1].endswith(NO_GLOBAL_CONFIGURATION)
    assert "listen " not in kit.dataplane.files[HTTP_LISTENERS_FILE]
    kit.add(_gc({"name": "http-8083", "port": 8083, "protocol": "HTTP"}))
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("H", "cafe.test")] == "- 0:http-8083:- - rr:1:10"
    assert kit.messages("cafe")[-1] == "Configuration for default/cafe was added or updated "
    assert "listen 8083 reuseport;" in kit.dataplane.files[HTTP_LISTENERS_FILE]
    assert "8083 http-8083;" in kit.dataplane.files[LISTENER_MAP_FILE]


def test_without_a_global_configuration_flag_no_listener_file_is_written(
    tmp_path: Path,
) -> None:
    kit = Kit(tmp_path)
    kit.add(*_service("app", "10.0.0.1"), _vs({"http": "http-8083"}))
    asyncio.run(kit.drain())
    assert HTTP_LISTENERS_FILE not in kit.dataplane.files
    assert kit.dataplane.records[("H", "cafe.test")] == "- 0:-:- - rr:1:10"


@given(
    st.one_of(st.just(""), dns_labels),
    st.one_of(st.just(""), dns_labels),
    st.booleans(),
    st.one_of(st.none(), st.just("ns/svc:80")),
)
def test_the_listener_suffix_round_trips(
    http: str, https: str, redirect: bool, default: str | None
) -> None:
    vh = VirtualHost("cafe.test", (), default, redirect_https=redirect, listeners=(http, https))
    line = encode_host(vh)
    assert decode_listeners(line) == (http, https)
    assert decode_host(line)[1:3] == (redirect, default)
    # One field: the record's other fields stay where the module and Lua read them.
    assert len(line.split(" ")) == 4
