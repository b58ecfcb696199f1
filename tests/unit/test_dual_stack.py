"""Dual stack: the listen lines of a public port (configs/listen.py), each
renderer writing them (nginx.conf, stream.conf, the Gateway
stream servers), and ``ferryman run``'s fall back to IPv4 when the machine
has no IPv6 (dataplane/ipv6.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ferryman.app import root
from ferryman.configs.listen import listens
from ferryman.configs.render import Renderer
from ferryman.dataplane import ipv6
from ferryman.dataplane.main_file import main_config
from ferryman.dataplane.state_dir import Paths
from ferryman.engine.settings import ListenSettings, NginxSettings, Settings
from ferryman.kinds.gateway.records.passthrough import render_passthrough
from ferryman.kinds.transport.records.stream import Passthrough, StreamServer, render_stream


def test_listen_lines_of_each_family() -> None:
    assert listens(80) == ["listen 80;", "listen [::]:80 ipv6only=on;"]
    assert listens(443, "ssl reuseport", dual_stack=False) == ["listen 443 ssl reuseport;"]
    # A listener's own address per family; the other family's every address (NIC).
    assert listens(8083, ipv4="127.0.0.1") == [
        "listen 127.0.0.1:8083;",
        "listen [::]:8083 ipv6only=on;",
    ]
    assert listens(8083, "udp", ipv4="127.0.0.1", ipv6="::1") == [
        "listen 127.0.0.1:8083 udp;",
        "listen [::1]:8083 udp;",
    ]
    assert listens(8083, ipv6="::1", dual_stack=False) == ["listen 8083;"]
    # A second server on a socket another opened with options: none repeated.
    assert listens(80, ipv6_only=False) == ["listen 80;", "listen [::]:80;"]


def _main(tmp_path: Path, disable_ipv6: bool = False) -> str:
    s = Settings(
        state_dir=tmp_path,
        listen=ListenSettings(disable_ipv6=disable_ipv6),
        nginx=NginxSettings(status_port=8080),
    )
    return Renderer().main(main_config(s, Paths(tmp_path), None, public=True))


def test_nginx_conf_listens_on_both_families_unless_disabled(tmp_path: Path) -> None:
    text = _main(tmp_path)
    for line in (
        "listen 80 default_server reuseport;",
        "listen [::]:80 default_server reuseport ipv6only=on;",
        "listen 443 ssl default_server reuseport;",
        "listen [::]:443 ssl default_server reuseport ipv6only=on;",
        "listen 8080;",
        "listen [::]:8080 ipv6only=on;",
    ):
        assert f"        {line}\n" in text, line
    assert "[::]" not in _main(tmp_path, disable_ipv6=True)


def _listen_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("listen ")]


def test_stream_servers_listen_on_both_families_unless_disabled() -> None:
    servers = [
        StreamServer("dns", 5353, True),
        StreamServer("tcp-v4", 5354, False, ipv4="127.0.0.1"),
    ]
    passthrough = Passthrough(443, "/run/ferryman/tls.sock")
    assert _listen_lines(render_stream(servers, passthrough)) == [
        "listen 5353 udp;",
        "listen [::]:5353 udp ipv6only=on;",
        "listen 127.0.0.1:5354;",
        "listen [::]:5354 ipv6only=on;",
        "listen 443 reuseport;",
        "listen [::]:443 reuseport ipv6only=on;",
    ]
    assert _listen_lines(render_stream(servers, passthrough, ipv6=False)) == [
        "listen 5353 udp;",
        "listen 127.0.0.1:5354;",
        "listen 443 reuseport;",
    ]


def test_gateway_tls_servers_on_every_address_listen_on_ipv6_too() -> None:
    sockets = [("*", 8443, False), ("10.0.0.5", 9443, True)]
    assert _listen_lines(render_passthrough(sockets)) == [
        "listen 8443;",
        "listen [::]:8443 ipv6only=on;",
        "listen 10.0.0.5:9443 ssl;",
    ]
    assert _listen_lines(render_passthrough(sockets, ipv6=False)) == [
        "listen 8443;",
        "listen 10.0.0.5:9443 ssl;",
    ]


def test_ipv6_is_unavailable_when_the_kernel_disables_it(tmp_path: Path) -> None:
    sysctl = tmp_path / "disable_ipv6"
    sysctl.write_text("1\n")
    assert ipv6.unavailable(sysctl) == "net.ipv6.conf.all.disable_ipv6 is 1"
    # This machine has IPv6 (::1 on loopback): available.
    sysctl.write_text("0\n")
    assert ipv6.unavailable(sysctl) == ""
    assert ipv6.unavailable(tmp_path / "absent") == ""


def test_ipv6_is_unavailable_without_ipv6_sockets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_ipv6(family: int, *args: object) -> object:
        raise OSError(97, "Address family not supported by protocol")

    monkeypatch.setattr(ipv6.socket, "socket", no_ipv6)
    why = ipv6.unavailable(tmp_path / "absent")
    assert why == "no IPv6 socket: Address family not supported by protocol"


def test_run_falls_back_to_ipv4_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(state_dir=tmp_path)
    monkeypatch.setattr(ipv6, "unavailable", lambda: "no IPv6 socket: nope")
    with caplog.at_level(logging.WARNING):
        assert root._listen_families(settings).listen.disable_ipv6 is True
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "IPv6 is not available here: listening on IPv4 only, as with --disable-ipv6"
    ]
    # Asked for IPv4 only: the machine is not asked.
    monkeypatch.setattr(ipv6, "unavailable", lambda: pytest.fail("asked"))
    disabled = Settings(state_dir=tmp_path, listen=ListenSettings(disable_ipv6=True))
    assert root._listen_families(disabled) is disabled
    # IPv6 there: as asked.
    monkeypatch.setattr(ipv6, "unavailable", lambda: "")
    assert root._listen_families(settings) is settings
