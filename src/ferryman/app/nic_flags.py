"""NGINX Ingress Controller's command line, read as ferryman's.

NIC parses flags with Go's flag package: one or two dashes, ``-name=value``
or ``-name value``, a bare ``-name`` (or ``-name=false``) for booleans, and no
subcommand. Its manifests and Helm chart are written that way, so ``translate``
rewrites such an argv into ferryman's own spelling before argparse reads it:
NIC's names become ferryman's, NIC-only switches become the ferryman flags that
do the same, and what ferryman does not implement is refused with one line that
says what to use instead. ferryman's own flags keep their meaning whichever way
they are spelled (docs/from-nic.md has the table).
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ferryman.app import flag_types


class FlagError(ValueError):
    """An argv ferryman cannot read (one line for the user)."""


# NIC's -ingress-class default: a command line without a subcommand (NIC's) gets it.
NIC_INGRESS_CLASS = "nginx"

# NIC's name -> ferryman's, for flags that are the same thing under another name.
RENAMED = {
    "default-http-listener-port": "http-port",
    "default-https-listener-port": "https-port",
    "ready-status-port": "ready-port",
    "prometheus-metrics-listen-port": "metrics-port",
}

_PLUS = "NGINX Plus only; ferryman runs open-source NGINX (or Angie)"
_TEMPLATES = (
    "ferryman has no NGINX templates: nginx.conf is fixed and resources become "
    "validated records; tune NGINX with --nginx-configmaps keys"
)


@dataclass(frozen=True)
class Unsupported:
    """A NIC flag ferryman does not implement: ``accepted`` values (NIC's default,
    or what ferryman does anyway) ask for nothing and pass; others are refused."""

    boolean: bool
    accepted: frozenset[str]
    why: str


def _off(why: str, *also: str) -> Unsupported:
    return Unsupported(True, frozenset(("false", *also)), why)


def _empty(why: str, *also: str) -> Unsupported:
    return Unsupported(False, frozenset(("", *also)), why)


UNSUPPORTED: dict[str, Unsupported] = {
    "nginx-plus": _off(_PLUS),
    "enable-app-protect": _off(_PLUS),
    "enable-app-protect-dos": _off(_PLUS),
    "app-protect-dos-debug": _off(_PLUS),
    "enable-app-protect-ip-intelligence": _off(_PLUS),
    "app-protect-log-level": _empty(_PLUS, "fatal"),
    "app-protect-dos-max-daemons": _empty(_PLUS, "0"),
    "app-protect-dos-max-workers": _empty(_PLUS, "0"),
    "app-protect-dos-memory": _empty(_PLUS, "0"),
    "app-protect-enforcer-address": _empty(_PLUS, "127.0.0.1:50000"),
    "plm-storage-url": _empty(_PLUS),
    "plm-storage-credentials-secret": _empty(_PLUS),
    "plm-storage-ca-secret": _empty(_PLUS),
    "plm-storage-client-ssl-secret": _empty(_PLUS),
    "plm-storage-insecure-skip-verify": _off(_PLUS),
    "mgmt-configmap": _empty(_PLUS),
    "enable-service-insight": _off(_PLUS),
    "service-insight-tls-secret": _empty(_PLUS),
    "service-insight-listen-port": _empty(_PLUS, "9114"),
    "agent": _off("NGINX Agent is not supported"),
    "agent-instance-group": _empty("NGINX Agent is not supported", "nginx-ingress-controller"),
    "main-template-path": _empty(_TEMPLATES),
    "ingress-template-path": _empty(_TEMPLATES),
    "virtualserver-template-path": _empty(_TEMPLATES),
    "transportserver-template-path": _empty(_TEMPLATES),
    "proxy": _empty("use --kubeconfig (NIC's -proxy is for its own testing)"),
    "watch-secret-namespace": _empty(
        "Secrets are read from the --watch-namespace namespaces; add the Secrets' namespaces there"
    ),
    "watch-namespace-label": _empty("name the namespaces with --watch-namespace"),
    "ingresslink": _empty(
        "BIG-IP IngressLink is not supported; use --external-service or --ingress-address "
        "for status addresses"
    ),
    "enable-external-dns": _off("not implemented"),
    "prometheus-tls-secret": _empty("/metrics is plain HTTP; put TLS in front of it"),
    "nginx-debug": _off("run a debug build of NGINX with --nginx-binary PATH"),
    "enable-config-safety": _off(
        "resources never become NGINX text in ferryman (validated records), so there "
        "is no per-resource nginx -t to ask for"
    ),
    "enable-custom-resources": Unsupported(
        True,
        frozenset(("true",)),
        "ferryman always serves NIC's custom resources; RBAC or absent CRDs keep them out",
    ),
    "enable-oidc": _off("OIDC policies are not implemented"),
    "enable-snippets": _off(
        "snippets are refused by design: nothing a user writes becomes NGINX text"
    ),
    "spire-agent-address": _empty("NGINX Service Mesh is not supported"),
    "enable-internal-routes": _off("NGINX Service Mesh is not supported"),
    "ready-status": Unsupported(
        True, frozenset(("true",)), "ferryman always serves /nginx-ready (on --ready-port)"
    ),
    "enable-directive-autoadjust": _off("not implemented"),
    "allow-empty-ingress-host": Unsupported(
        True, frozenset(("true", "false")), "ferryman serves Ingress rules without a host"
    ),
    "ssl-dynamic-reload": Unsupported(
        True, frozenset(("true",)), "ferryman never reloads NGINX for a certificate"
    ),
    "weight-changes-dynamic-reload": Unsupported(True, frozenset(("true", "false")), ""),
    "enable-telemetry-reporting": Unsupported(True, frozenset(("true", "false")), ""),
}

# NIC's values ferryman's --log-level and --log-format take under another name.
_LOG_LEVELS = {"trace": "debug", "warn": "warning", "fatal": "error"}
_LOG_FORMATS = {
    "glog": "text",
    "text-unix": "text",
    "text-unix-ms": "text",
    "json-unix": "json",
    "json-unix-ms": "json",
}
# NIC's stub_status port when -nginx-status is on (ferryman's default is off).
NIC_STATUS_PORT = "8080"
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_TOP_LEVEL = {"-h": "-h", "-help": "--help", "--help": "--help"}
_VERSION = ("-version", "--version")


def go_bool(flag: str, value: str) -> bool:
    """Go's strconv.ParseBool, as the flag package reads a boolean."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise FlagError(f"invalid boolean value {value!r} for {flag}")


def _boolean_word(value: str) -> bool:
    return value in _TRUE or value in _FALSE or value.lower() in ("yes", "no")


@dataclass
class _Argv:
    """The translated arguments of one subcommand, and what NIC's switches asked."""

    actions: dict[str, argparse.Action]
    out: list[str] = field(default_factory=list)
    metrics_off: bool = False
    status: bool | None = None
    passthrough_port: str = ""

    def flag(self, name: str, value: str | None = None) -> None:
        self.out.append(f"--{name}" if value is None else f"--{name}={value}")

    def unset(self, name: str) -> None:
        self.out = [t for t in self.out if t != f"--{name}"]

    def finish(self) -> list[str]:
        https = next(
            (t.partition("=")[2] for t in reversed(self.out) if t.startswith("--https-port=")),
            "443",
        )
        if self.passthrough_port and self.passthrough_port != https:
            raise FlagError(
                f"-tls-passthrough-port={self.passthrough_port} is not supported: TLS "
                "passthrough shares the HTTPS port; set --https-port instead"
            )
        head: list[str] = []
        tail: list[str] = []
        if self.status is True:  # NIC's port unless one is named (a later flag wins)
            head.append(f"--nginx-status-port={NIC_STATUS_PORT}")
        elif self.status is False:
            tail.append("--nginx-status-port=0")
        if self.metrics_off:
            tail.append("--metrics-port=0")

        def known(tokens: list[str]) -> list[str]:  # render serves neither
            return [t for t in tokens if t.partition("=")[0] in self.actions]

        return known(head) + self.out + known(tail)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (ferryman's or NIC's spelling) parsed; a FlagError is one line
    and exit code 2, as argparse's own errors are."""
    try:
        return parser.parse_args(translate(argv, parser))
    except FlagError as e:
        command = argv[0] if argv and not argv[0].startswith("-") else "run"
        parser.exit(2, f"ferryman {command}: {e} (see ferryman {command} --help)\n")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def translate(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """``argv`` in ferryman's spelling (``--name=value`` after the subcommand);
    raises FlagError with the line to print. Without a subcommand (NIC's
    command line), ``run`` is meant."""
    argv = list(argv)
    if not argv or argv[0] in _TOP_LEVEL:
        return [_TOP_LEVEL.get(a, a) for a in argv[:1]] + argv[1:]
    if any(a in _VERSION for a in argv[: argv.index("--") if "--" in argv else len(argv)]):
        return ["--version"]
    commands = _subparsers(parser)
    if not argv[0].startswith("-"):
        command, rest = argv[0], argv[1:]
        sub = commands.get(command)
        if sub is None:
            return argv  # argparse names the choices
        return [command, *_translate(rest, sub, command)]
    # NIC's args as its manifests write them: NIC's default class too (a later
    # -ingress-class wins), so its Ingresses of class nginx are served with
    # only the image changed. ``ferryman run`` keeps ferryman's own default.
    return [
        "run",
        f"--ingress-class={NIC_INGRESS_CLASS}",
        *_translate(argv, commands["run"], "run"),
    ]


def _translate(rest: list[str], sub: argparse.ArgumentParser, command: str) -> list[str]:
    state = _Argv(dict(sub._option_string_actions))
    positional = any(not a.option_strings for a in sub._actions)
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if token == "--":  # Go's end of flags; what follows is argparse's
            state.out.extend(rest[i - 1 :])
            break
        if token == "-h" or (positional and (token == "-" or not token.startswith("-"))):
            state.out.append(token)
            continue
        if token == "-" or not token.startswith("-"):
            raise FlagError(
                f"unexpected argument {token!r} (flags are -name=value, -name value or "
                "--name value)"
            )
        dashes = 2 if token.startswith("--") else 1
        name, eq, value = token[dashes:].partition("=")
        if not name or name.startswith("-"):
            raise FlagError(f"bad flag syntax: {token}")
        if name in RENAMED:
            if f"--{RENAMED[name]}" not in state.actions:
                raise FlagError(f"{token.partition('=')[0]} is not a flag of ferryman {command}")
            value, i = _value(rest, i, token, eq, value)
            _check(state.actions[f"--{RENAMED[name]}"], token.partition("=")[0], value)
            state.flag(RENAMED[name], value)
        elif f"--{name}" in state.actions:
            i = _ferryman_flag(state, rest, i, name, token, eq, value)
        elif name in ("enable-prometheus-metrics", "nginx-status"):
            on, i = _switch(rest, i, token, eq, value)
            if name == "nginx-status":
                state.status = on
            else:
                state.metrics_off = not on
        elif name == "v":
            value, i = _value(rest, i, token, eq, value)
            if not value.isdigit():
                raise FlagError(f"invalid value {value!r} for -v: a number (3 and up: debug)")
            state.flag("log-level", "debug" if int(value) >= 3 else "info")
        elif name == "tls-passthrough-port":
            state.passthrough_port, i = _value(rest, i, token, eq, value)
        elif name in UNSUPPORTED:
            spec = UNSUPPORTED[name]
            if spec.boolean:
                on, i = _switch(rest, i, token, eq, value)
                value = "true" if on else "false"
            else:
                value, i = _value(rest, i, token, eq, value)
            if value not in spec.accepted:
                raise FlagError(f"-{name}={value} is not supported: {spec.why}")
        elif dashes == 2 and (full := _abbreviated(name, state.actions)):
            i = _ferryman_flag(state, rest, i, full, token, eq, value)
        else:
            raise FlagError(_unknown(token.partition("=")[0], name, state.actions))
    return state.finish()


def _check(action: argparse.Action, flag: str, value: str) -> None:
    """Refuse a renamed flag's bad value under the name the user wrote."""
    if callable(action.type):
        try:
            action.type(value)
        except (argparse.ArgumentTypeError, ValueError) as e:
            raise FlagError(f"argument {flag} ({action.option_strings[-1]}): {e}") from None


def _value(rest: list[str], i: int, token: str, eq: str, value: str) -> tuple[str, int]:
    """A value flag's value: after '=', else the next argument (Go takes it as is)."""
    if eq:
        return value, i
    if i >= len(rest):
        raise FlagError(f"flag needs an argument: {token}")
    return rest[i], i + 1


def _switch(rest: list[str], i: int, token: str, eq: str, value: str) -> tuple[bool, int]:
    """A Go boolean: bare is true, ``=value`` sets it; ``-name value`` is refused,
    as Go would stop reading flags there."""
    if eq:
        return go_bool(token.partition("=")[0], value), i
    if i < len(rest) and _boolean_word(rest[i]):
        raise FlagError(
            f"{token} {rest[i]}: a boolean flag takes its value after '=': {token}={rest[i]}"
        )
    return True, i


def _ferryman_flag(
    state: _Argv, rest: list[str], i: int, name: str, token: str, eq: str, value: str
) -> int:
    action = state.actions[f"--{name}"]
    if action.nargs == 0:  # a switch: --name, or Go's -name=true|false
        on, i = _switch(rest, i, token, eq, value)
        state.unset(name)
        if on:
            state.flag(name)
        return i
    if action.type is flag_types.boolean:
        # ferryman's own --name BOOL form stays; bare is Go's true.
        if eq:
            # Go's spellings of a boolean; anything else is argparse's to judge.
            value = {**dict.fromkeys(_TRUE, "true"), **dict.fromkeys(_FALSE, "false")}.get(
                value, value
            )
        elif i < len(rest) and _boolean_word(rest[i]):
            value, i = rest[i], i + 1
        else:
            value = "true"
        state.flag(name, value)
        return i
    value, i = _value(rest, i, token, eq, value)
    if value == "" and action.default is None:
        return i  # Go's empty string flag: none given, which is ferryman's default too
    if name == "log-level":
        value = _LOG_LEVELS.get(value, value)
    elif name == "log-format":
        value = _LOG_FORMATS.get(value, value)
    elif name == "external-service" and value and "/" not in value:
        # NIC names a Service in the controller's own namespace.
        value = f"{os.environ.get('POD_NAMESPACE', 'default')}/{value}"
    state.flag(name, value)
    return i


def _abbreviated(name: str, actions: dict[str, argparse.Action]) -> str:
    """The flag ``--name`` abbreviates, as argparse allowed it: "" unless one."""
    matches = [o[2:] for o in actions if o.startswith(f"--{name}")]
    return matches[0] if len(matches) == 1 else ""


def _unknown(flag: str, name: str, actions: dict[str, argparse.Action]) -> str:
    known = [o.lstrip("-") for o in actions if o.startswith("--")]
    known += [*RENAMED, *UNSUPPORTED, "enable-prometheus-metrics", "nginx-status"]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean -{close[0]}?" if close else ""
    return f"unknown flag {flag}{hint}"
