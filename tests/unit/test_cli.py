"""The command line: every flag explained with its default; a wrong value is one
line and exit code 2."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ferryman.app import cli
from ferryman.app import root as app
from ferryman.engine.settings import Settings


def _subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices[name]
    return parser


def _help_by_flag(command: str) -> dict[str, str]:
    """``ferryman <command> --help``: each flag's help text, joined from its lines."""
    text = _subcommand(command).format_help()
    out: dict[str, str] = {}
    flag = ""
    for line in text[text.index("options:") :].splitlines()[1:]:
        if line.startswith("  -"):
            # "  --flag METAVAR   help..." or, when the flag is long, help below.
            invocation, _, rest = line.strip().partition("  ")
            flag = next(t.rstrip(",") for t in invocation.split() if t.startswith("--"))
            out[flag] = rest.strip()
        else:
            out[flag] = f"{out[flag]} {line.strip()}".strip()
    return out


@pytest.mark.parametrize("command", ["run", "render", "machine-controller"])
def test_every_flag_has_a_help_line_with_its_default(command: str) -> None:
    parser = _subcommand(command)
    helps = _help_by_flag(command)
    for action in parser._actions:
        flag = next(s for s in action.option_strings if s.startswith("--"))
        if flag == "--help" or action.help == argparse.SUPPRESS:  # retired, still accepted
            continue
        text = helps[flag]
        assert action.help, f"{flag} has no help"
        assert "default" in text or action.required, f"{flag} names no default: {text!r}"


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.parser().parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, not the usage
    return err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--http-port", "70000"], "--http-port: '70000' is not a port number"),
        (["run", "--https-port", "0"], "--https-port: '0' is not a port NGINX can listen on"),
        (["run", "--ready-port", "-1"], "--ready-port: '-1' is not a port number"),
        (["run", "--metrics-port", "x"], "--metrics-port: 'x' is not a port number"),
        (["run", "--nginx-status-port", "65536"], "'65536' is not a port number"),
        (["run", "--manifests", "/nonexistent/manifests"], "is not a directory"),
        (["run", "--kubeconfig", "/nonexistent/kubeconfig"], "cannot be read"),
        (["run", "--nginx-reload-timeout", "0"], "not a positive number of seconds"),
        (["run", "--leader-election-retry-period", "nan"], "not a positive number of seconds"),
        (["run", "--shutdown-grace-period", "-1"], "not a non-negative number of seconds"),
        (["run", "--shutdown-grace-period", "inf"], "not a non-negative number of seconds"),
        (["render", "--output", "/tmp/out"], "required: --manifests"),
        (["machine-controller", "--drain-timeout", "0"], "not a positive number of seconds"),
        (["machine-controller", "--webhook-port", "70000"], "'70000' is not a port number"),
    ],
)
def test_a_wrong_value_is_one_line_and_exit_code_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(argv, capsys)
    assert says in err
    assert err.startswith(f"ferryman {argv[0]}: ")


def test_a_kubeconfig_that_is_not_one_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not: [a kubeconfig\n")
    argv = ["run", "--kubeconfig", str(kubeconfig), "--state-dir", str(tmp_path / "state")]
    result = subprocess.run(
        [sys.executable, "-m", "ferryman.app.cli", *argv, "--metrics-port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"ferryman run: no usable kubeconfig ({kubeconfig}): " in result.stderr
    # NGINX starts while the client is built (issue 17): it is stopped again.
    pid_file = tmp_path / "state" / "nginx.pid"
    if pid_file.exists():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text()), 0)


def test_a_machine_controller_webhook_needs_its_certificate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["machine-controller", "--webhook-port", "9443"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "ferryman machine-controller: --webhook-port needs --webhook-cert-file and "
        "--webhook-key-file\n"
    )


def _run(*args: str) -> object:
    return cli.parser().parse_args(["run", "--manifests", "/tmp", *args])


def test_record_limits_and_host_policy_are_parsed() -> None:
    args = _run(
        "--records-memory-size", "4m",
        "--max-record-bytes", "1000",
        "--allowed-host-suffixes", "team-a=a.example.com, team-a=shop.test,edge=*",
    )  # fmt: skip
    assert vars(args)["records_memory_size"] == "4m"
    assert vars(args)["max_record_bytes"] == 1000
    assert vars(args)["allowed_host_suffixes"] == (
        ("team-a", "a.example.com"),
        ("team-a", "shop.test"),
        ("edge", "*"),
    )
    defaults = vars(_run())
    assert (defaults["records_memory_size"], defaults["max_record_bytes"]) == ("128m", 524288)
    assert defaults["allowed_host_suffixes"] == ()


def test_shutdown_grace_period_takes_zero_and_fractions() -> None:
    assert vars(_run())["shutdown_grace_period"] == 0
    assert vars(_run("--shutdown-grace-period", "0"))["shutdown_grace_period"] == 0
    assert vars(_run("--shutdown-grace-period", "2.5"))["shutdown_grace_period"] == 2.5


@pytest.mark.parametrize(
    "args",
    [
        ("--records-memory-size", "512k"),  # below 1m
        ("--records-memory-size", "4g"),
        ("--records-memory-size", "4m;"),
        ("--max-record-bytes", "0"),
        ("--allowed-host-suffixes", "team-a"),
        ("--allowed-host-suffixes", "Team=a.example.com"),
        ("--allowed-host-suffixes", "a=*.example.com"),
        ("--allowed-host-suffixes", "a=ex ample.com"),
    ],
)
def test_bad_record_and_policy_values_are_refused(
    args: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _run(*args)
    assert args[0] in capsys.readouterr().err


def test_readiness_gate_webhook_flags_are_parsed() -> None:
    args = vars(
        _run(
            "--readiness-gate-webhook-port", "8443",
            "--readiness-gate-webhook-cert-secret", "ferryman/webhook-cert",
            "--readiness-gate-webhook-cert-hosts", "ferryman-webhook.ferryman.svc, 127.0.0.1,::1",
            "--readiness-gate-webhook-configuration", "ferryman-readiness-gates",
        )
    )  # fmt: skip
    assert args["readiness_gate_webhook_port"] == 8443
    assert args["readiness_gate_webhook_cert_secret"] == ("ferryman", "webhook-cert")
    assert args["readiness_gate_webhook_cert_hosts"] == (
        "ferryman-webhook.ferryman.svc",
        "127.0.0.1",
        "::1",
    )
    assert args["readiness_gate_webhook_configuration"] == "ferryman-readiness-gates"
    defaults = vars(_run())
    assert defaults["readiness_gate_webhook_port"] == 0  # off
    assert defaults["readiness_gate_webhook_cert_secret"] is None
    assert defaults["readiness_gate_webhook_configuration"] is None


@pytest.mark.parametrize(
    "args",
    [
        ("--readiness-gate-webhook-port", "65536"),
        ("--readiness-gate-webhook-cert-secret", "webhook-cert"),
        ("--readiness-gate-webhook-cert-secret", "Ferryman/webhook-cert"),
        ("--readiness-gate-webhook-cert-secret", "ferryman/"),
        ("--readiness-gate-webhook-cert-hosts", "ferryman webhook"),
        ("--readiness-gate-webhook-configuration", "Not_A_Name"),
    ],
)
def test_bad_readiness_gate_webhook_values_are_refused(
    args: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _run(*args)
    assert args[0] in capsys.readouterr().err


def test_the_webhook_port_needs_a_certificate_secret(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ferryman.app.cli", "run", "--state-dir", str(tmp_path),
         "--readiness-gate-webhook-port", "8443"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        "ferryman run: --readiness-gate-webhook-port needs --readiness-gate-webhook-cert-secret\n"
    )


def test_machine_lifecycle_hooks_need_kubernetes_mode(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ferryman.app.cli", "run", "--state-dir", str(tmp_path),
         "--manifests", str(tmp_path), "--machine-lifecycle-hooks", "openshift"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == "ferryman run: --machine-lifecycle-hooks needs Kubernetes mode\n"


@pytest.mark.parametrize("value", ["on", "OpenShift", ""])
def test_machine_lifecycle_hooks_take_one_of_three_values(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _run("--machine-lifecycle-hooks", value)
    assert "--machine-lifecycle-hooks" in capsys.readouterr().err


def test_the_machine_controllers_modules_load_only_for_it() -> None:
    """`ferryman run` builds every subcommand's parser; it carries only the pure
    hook model of the machine controller, not its client, drain or webhook."""
    code = (
        "import sys, ferryman.app.cli; ferryman.app.cli.parser(); "
        "print(sorted(m for m in sys.modules if m.startswith('ferryman.machines.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "['ferryman.machines.command',",
        "'ferryman.machines.conditions',",
        "'ferryman.machines.hooks',",
        "'ferryman.machines.lifecycle']",
    ]


def test_the_readiness_gate_webhook_implies_gated_routing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pods the webhook gates are not Ready until ferryman routes to them."""
    seen: list[Settings] = []

    async def run(settings: Settings, kinds: object = None) -> int:
        seen.append(settings)
        return 0

    monkeypatch.setattr(app, "run", run)
    base = ["run", "--state-dir", str(tmp_path), "--log-level", "error"]
    assert cli.main(base) == 0
    webhook = ["--readiness-gate-webhook-port", "8443"]
    webhook += ["--readiness-gate-webhook-cert-secret", "ferryman/cert"]
    assert cli.main([*base, *webhook]) == 0
    assert cli.main([*base, "--readiness-gates"]) == 0
    assert [s.gates.enabled for s in seen] == [False, True, True]


def test_the_retired_angie_dns_port_still_starts_and_is_said_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A deployment written for Angie's classic flavour keeps starting."""

    async def run(settings: Settings, kinds: object = None) -> int:
        return 0

    monkeypatch.setattr(app, "run", run)
    assert cli.main(["run", "--state-dir", str(tmp_path), "--angie-dns-port", "5353"]) == 0
    assert "--angie-dns-port is ignored" in capsys.readouterr().err
