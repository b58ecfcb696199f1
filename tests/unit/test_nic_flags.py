"""NIC's command line (Go's flag syntax, NIC's names) read as ferryman's: the
same Settings whichever way a flag is spelled, NIC's names as ferryman's, and
one line for what ferryman does not do."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.app import cli, flag_settings, nic_flags
from ferryman.engine.settings import Settings

# Values for flags whose default is none (or not a valid value to give).
_SAMPLES = {
    "--manifests": "/tmp",
    "--kubeconfig": "/dev/null",
    "--global-configuration": "nginx-ingress/global",
    "--nginx-configmaps": "nginx-ingress/nginx-config",
    "--external-service": "nginx-ingress/nginx-ingress",
    "--gateway-addresses": "10.0.0.10-10.0.0.12",
    "--worker-shutdown-timeout": "10s",
    "--readiness-gate-webhook-cert-secret": "ferryman/webhook-cert",
    "--readiness-gate-webhook-configuration": "ferryman-gates",
    "--readiness-gate-webhook-cert-hosts": "a.example.com,127.0.0.1",
    "--allowed-host-suffixes": "team-a=a.example.com",
    "--data-plane-binary": "/usr/sbin/nginx",
    "--ingress-address": "10.0.0.1,10.0.0.2",
    "--watch-namespace": "a,b",
    "--nginx-status-port": "8080",
    "--http-port": "8080",
    "--ready-port": "18081",
}


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices["run"]
    return parser


def _flags() -> dict[str, tuple[str | None, ...]]:
    """Every ``ferryman run`` flag -> values to give it (None: a switch)."""
    out: dict[str, tuple[str | None, ...]] = {}
    for action in _run_parser()._actions:
        flag = next((s for s in action.option_strings if s.startswith("--")), None)
        if flag in (None, "--help"):
            continue
        assert flag is not None
        if action.nargs == 0:
            out[flag] = (None,)
        elif action.choices:
            out[flag] = tuple(str(c) for c in action.choices)
        elif flag in _SAMPLES:
            out[flag] = (_SAMPLES[flag],)
        elif action.default is None:
            continue  # no value known to be valid: add one to _SAMPLES
        elif isinstance(action.default, tuple):
            out[flag] = (",".join(action.default),)
        else:
            out[flag] = (str(action.default).lower() if action.default in (True, False) else
                         str(action.default),)  # fmt: skip
    return out


FLAGS = _flags()


def _parsed(argv: list[str]) -> tuple[dict[str, Any], Settings]:
    p = cli.parser()
    args = nic_flags.parse_args(p, argv)
    return vars(args), flag_settings.run_settings(args)


def _spell(flag: str, value: str | None, how: str) -> list[str]:
    name = flag[2:]
    dash = "-" if how.startswith("go") else "--"
    if value is None:
        return [f"{dash}{name}"] if how != "go=true" else [f"-{name}=true"]
    if how.endswith("="):
        return [f"{dash}{name}={value}"]
    return [f"{dash}{name}", value]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(sorted(FLAGS)).flatmap(
            lambda f: st.tuples(
                st.just(f),
                st.sampled_from(FLAGS[f]),
                st.sampled_from(("go=", "go", "gnu=", "gnu", "go=true")),
            )
        ),
        max_size=8,
        unique_by=lambda t: t[0],
    )
)
def test_every_ferryman_flag_spelled_the_go_ways_gives_the_same_settings(
    chosen: list[tuple[str, str | None, str]],
) -> None:
    # No subcommand: NIC's command line means run, with NIC's class unless named.
    ferryman_way: list[str] = ["run", f"--ingress-class={nic_flags.NIC_INGRESS_CLASS}"]
    go_way: list[str] = []
    for flag, value, how in chosen:
        ferryman_way += [flag] if value is None else [flag, value]
        go_way += _spell(flag, value, how)
    assert _parsed(go_way or ["-ingress-class=nginx"]) == _parsed(ferryman_way)


@pytest.mark.parametrize(
    ("nic", "ferryman"),
    [
        (["-ingress-class=nginx"], ["--ingress-class", "nginx"]),
        (["-default-http-listener-port=8080"], ["--http-port", "8080"]),
        (["-default-https-listener-port", "8443"], ["--https-port", "8443"]),
        (["-ready-status-port=18081"], ["--ready-port", "18081"]),
        (["--prometheus-metrics-listen-port=9200"], ["--metrics-port", "9200"]),
        (["-enable-prometheus-metrics=false"], ["--metrics-port", "0"]),
        (
            ["-enable-prometheus-metrics=false", "-prometheus-metrics-listen-port=9200"],
            ["--metrics-port", "0"],
        ),
        (["-enable-prometheus-metrics"], []),
        (["-nginx-status"], ["--nginx-status-port", "8080"]),
        (["-nginx-status-port=8088", "-nginx-status=true"], ["--nginx-status-port", "8088"]),
        (["-nginx-status=false", "-nginx-status-port=8088"], ["--nginx-status-port", "0"]),
        (
            ["-nginx-configmaps=$(POD_NAMESPACE)x/nginx-config".replace("$(POD_NAMESPACE)", "ns")],
            ["--nginx-configmaps", "nsx/nginx-config"],
        ),
        (["-watch-namespace=a,b"], ["--watch-namespace", "a,b"]),
        (["-global-configuration=", "-external-service="], []),
        (["-health-status"], ["--health-status"]),
        (["-health-status=false"], []),
        (["-health-status", "-health-status=false"], []),
        (["-log-level=trace"], ["--log-level", "debug"]),
        (["-log-level=warn"], ["--log-level", "warning"]),
        (["-log-format=glog"], ["--log-format", "text"]),
        (["-log-format=json-unix-ms"], ["--log-format", "json"]),
        (["-v=3"], ["--log-level", "debug"]),
        (["-v", "1"], ["--log-level", "info"]),
        (["-enable-leader-election=false"], ["--enable-leader-election", "false"]),
        (["-enable-leader-election=F"], ["--enable-leader-election", "false"]),
        (["-enable-leader-election"], ["--enable-leader-election", "true"]),
        (["-nginx-reload-timeout=60000"], ["--nginx-reload-timeout", "60"]),
        (["-disable-ipv6"], ["--disable-ipv6"]),
        (["-disable-ipv6=true"], ["--disable-ipv6"]),
        (["-disable-ipv6=false"], []),
        (["--disable-ipv6", "-disable-ipv6=false"], []),
        (["-tls-passthrough-port=443", "-enable-tls-passthrough"], ["--enable-tls-passthrough"]),
        (
            ["-default-https-listener-port=8443", "-tls-passthrough-port=8443"],
            ["--https-port", "8443"],
        ),
        (
            ["-default-server-tls-secret=ops/default", "-wildcard-tls-secret", "ops/wild"],
            ["--default-server-tls-secret", "ops/default", "--wildcard-tls-secret=ops/wild"],
        ),
        # NIC's chart spells out its defaults; asking for nothing passes.
        (
            [
                "-nginx-plus=false",
                "-enable-app-protect=false",
                "-enable-snippets=false",
                "-enable-custom-resources",
                "-ready-status=true",
                "-enable-telemetry-reporting=true",
                "-main-template-path=",
                "-disable-ipv6=false",
                "-ssl-dynamic-reload=true",
                "-agent=false",
                "-enable-cert-manager=false",
            ],
            [],
        ),
    ],
)
def test_nic_flags_mean_what_they_mean_in_nic(nic: list[str], ferryman: list[str]) -> None:
    assert _parsed(nic)[1] == _parsed(["run", "--ingress-class=nginx", *ferryman])[1]


def test_nics_command_line_serves_nics_default_class() -> None:
    """NIC's manifests pass no -ingress-class: NIC's args, with only the image
    changed, serve class nginx; ``ferryman run`` keeps ferryman's own default,
    and a named class wins either way."""
    assert _parsed(["-report-ingress-status"])[1].ingress_class == "nginx"
    assert _parsed(["run", "-report-ingress-status"])[1].ingress_class == "ferryman"
    assert _parsed(["-ingress-class=ferryman"])[1].ingress_class == "ferryman"
    assert _parsed(["-ingress-class", "edge", "-v=3"])[1].ingress_class == "edge"


def test_disable_ipv6_is_a_setting_ipv6_on_by_default_as_in_nic() -> None:
    assert _parsed(["run"])[1].listen.disable_ipv6 is False
    assert _parsed(["-disable-ipv6"])[1].listen.disable_ipv6 is True
    assert _parsed(["-disable-ipv6=true"])[1].listen.disable_ipv6 is True
    assert _parsed(["-disable-ipv6=false"])[1].listen.disable_ipv6 is False
    assert _parsed(["run", "--disable-ipv6"])[1].listen.disable_ipv6 is True


def test_render_takes_disable_ipv6(tmp_path: Path) -> None:
    p = cli.parser()
    args = nic_flags.parse_args(p, ["render", "-manifests=/tmp", f"-output={tmp_path}"])
    assert flag_settings.render_settings(args).listen.disable_ipv6 is False
    args = nic_flags.parse_args(
        p, ["render", "-manifests=/tmp", f"-output={tmp_path}", "-disable-ipv6"]
    )
    assert flag_settings.render_settings(args).listen.disable_ipv6 is True


def test_render_takes_nics_metrics_and_status_switches_as_nothing_to_do(tmp_path: Path) -> None:
    p = cli.parser()
    argv = ["render", "-manifests=/tmp", f"-output={tmp_path}", "-ingress-class=nginx"]
    args = nic_flags.parse_args(p, [*argv, "-enable-prometheus-metrics=false", "-nginx-status"])
    assert args == nic_flags.parse_args(p, argv)


def test_external_service_by_name_is_in_the_controllers_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "nginx-ingress")
    _, s = _parsed(["-external-service=nginx-ingress-controller"])
    assert s.kubernetes.external_service == "nginx-ingress/nginx-ingress-controller"


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err and "unrecognized arguments" not in err
    return err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["-nginx-plus"], "-nginx-plus=true is not supported: NGINX Plus only"),
        (["-enable-snippets=true"], "not supported: snippets are refused by design"),
        (["-main-template-path=/etc/nginx/nginx.tmpl"], "--nginx-configmaps"),
        (["-watch-namespace-label=team=a"], "name the namespaces with --watch-namespace"),
        (["-ready-status=false"], "always serves /nginx-ready (on --ready-port)"),
        (["-proxy", "http://127.0.0.1:8001"], "use --kubeconfig"),
        (["-tls-passthrough-port=8443"], "set --https-port instead"),
        (["-ingres-class=nginx"], "unknown flag -ingres-class; did you mean -ingress-class?"),
        (["-no-such-flag"], "unknown flag -no-such-flag"),
        (
            ["-health-status", "false"],
            "a boolean flag takes its value after '=': -health-status=false",
        ),
        (["-health-status=maybe"], "invalid boolean value 'maybe' for -health-status"),
        (["-ingress-class"], "flag needs an argument: -ingress-class"),
        (
            ["render", "-ready-status-port=8081"],
            "-ready-status-port is not a flag of ferryman render",
        ),
        (["run", "stray"], "unexpected argument 'stray'"),
        (
            ["-default-http-listener-port=70000"],
            "argument -default-http-listener-port (--http-port): '70000' is not a port number",
        ),
    ],
)
def test_what_ferryman_does_not_do_is_one_line_naming_what_to_use(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(argv, capsys)
    assert says in err
    command = "render" if argv[0] == "render" else "run"
    assert err.startswith(f"ferryman {command}: ")


def test_go_spellings_of_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["-version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("ferryman ")
    with pytest.raises(SystemExit):
        cli.main(["run", "-help"])
    assert "--ingress-class" in capsys.readouterr().out


def test_argparse_abbreviations_of_ferryman_flags_still_work(tmp_path: Path) -> None:
    assert _parsed(["run", "--ingress-cl", "x"]) == _parsed(["run", "--ingress-class", "x"])


# NIC 5.5.4's Helm chart with its default values renders these args (its
# _helpers.tpl "nginx-ingress.args", release "nginx-ingress"), $(POD_NAMESPACE)
# expanded by the kubelet.
NIC_CHART_ARGS = [
    "-nginx-plus=false", "-nginx-reload-timeout=60000", "-enable-app-protect=false",
    "-enable-app-protect-ip-intelligence=false", "-enable-app-protect-dos=false",
    "-nginx-configmaps=nginx-ingress/nginx-ingress", "-ingress-class=nginx",
    "-health-status=false", "-health-status-uri=/nginx-health", "-nginx-debug=false",
    "-log-level=info", "-log-format=glog", "-enable-config-safety=false",
    "-nginx-status=true", "-nginx-status-port=8080", "-nginx-status-allow-cidrs=127.0.0.1",
    "-report-ingress-status", "-external-service=nginx-ingress-controller",
    "-enable-leader-election=true", "-leader-election-lock-name=nginx-ingress-leader-election",
    "-enable-prometheus-metrics=true", "-prometheus-metrics-listen-port=9113",
    "-prometheus-tls-secret=", "-enable-service-insight=false",
    "-service-insight-listen-port=9114", "-service-insight-tls-secret=",
    "-enable-custom-resources=true", "-enable-snippets=false", "-disable-ipv6=false",
    "-enable-tls-passthrough=false", "-enable-cert-manager=false", "-enable-oidc=false",
    "-enable-external-dns=false", "-default-http-listener-port=80",
    "-default-https-listener-port=443", "-allow-empty-ingress-host=false",
    "-ready-status=true", "-ready-status-port=8081", "-enable-latency-metrics=false",
    "-ssl-dynamic-reload=true", "-enable-telemetry-reporting=true",
    "-weight-changes-dynamic-reload=false",
]  # fmt: skip


def test_nic_charts_default_args_run_ferryman_as_nic_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "nginx-ingress")
    args, s = _parsed(NIC_CHART_ARGS)
    assert args["command"] == "run"
    assert (s.ingress_class, s.nginx.configmap) == ("nginx", ("nginx-ingress", "nginx-ingress"))
    assert (
        s.listen.http_port,
        s.listen.https_port,
        s.listen.ready_port,
        s.listen.metrics_port,
    ) == (80, 443, 8081, 9113)
    assert (s.nginx.status_port, s.nginx.status_allow) == (8080, ("127.0.0.1/32",))
    assert s.nginx.reload_timeout == 60
    assert s.kubernetes.report_status and s.leader_election.enabled
    assert s.kubernetes.external_service == "nginx-ingress/nginx-ingress-controller"
    assert s.leader_election.lock_name == "nginx-ingress-leader-election"
    assert (args["log_format"], args["log_level"]) == ("text", "info")
    assert s.nginx.health_uri == ""
    assert s.listen.disable_ipv6 is False  # -disable-ipv6=false: IPv4 and IPv6


def test_nic_deployment_manifests_args_run_ferryman() -> None:
    # deployments/deployment/nginx-ingress.yaml, NIC 5.5.4.
    _, s = _parsed(["-nginx-configmaps=default/nginx-config", "-report-ingress-status",
                    "-external-service=nginx-ingress"])  # fmt: skip
    assert s.nginx.configmap == ("default", "nginx-config")
    assert s.kubernetes.report_status


def test_every_flag_takes_no_value_or_one() -> None:
    """nic_flags reads each flag as Go does, a switch or one value: a flag taking
    several values (nargs) would need it taught first."""
    for sub in nic_flags._subparsers(cli.parser()).values():
        assert [a.option_strings for a in sub._actions if a.nargs not in (None, 0)] == []


def test_default_server_and_wildcard_tls_secrets_reach_the_settings() -> None:
    """They were refused as not implemented (issue 29 item 4)."""
    settings = _parsed(["-default-server-tls-secret=ops/default", "-wildcard-tls-secret=ops/wild"])[
        1
    ]
    assert settings.tls.default_server_secret == ("ops", "default")
    assert settings.tls.wildcard_secret == ("ops", "wild")
