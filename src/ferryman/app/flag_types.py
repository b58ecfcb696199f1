"""Argument types for the command line: each turns a flag's text into the value
ferryman runs with, or refuses it with a message naming the flag's value.

Shared by ``ferryman run``/``render`` (cli.py) and ``ferryman machine-controller``
(machines/command.py). Flags that reach nginx.conf are checked with the same
validation as resources (``checked``).
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import re
from collections.abc import Callable
from pathlib import Path

from ferryman.configs.model import size_bytes
from ferryman.resources import validation


def add_log_flags(p: argparse.ArgumentParser) -> None:
    """``--log-format`` and ``--log-level``, as every subcommand that runs has them."""
    p.add_argument(
        "--log-format", choices=("text", "json"), default="text", help="text (key=value) or json"
    )
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="the least severe level logged",
    )


def listen_port(value: str) -> int:
    number = port(value)
    if number == 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port NGINX can listen on")
    return number


def seconds(value: str, *, zero: bool = False) -> float:
    try:
        seconds = float(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from e
    if not (math.isfinite(seconds) and (seconds > 0 or (zero and seconds == 0))):
        kind = "non-negative" if zero else "positive"
        raise argparse.ArgumentTypeError(f"{value!r} is not a {kind} number of seconds")
    return seconds


def non_negative_seconds(value: str) -> float:
    return seconds(value, zero=True)


def existing_dir(value: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is not a directory")
    return path


def readable_file(value: str) -> str:
    try:
        Path(value).open("rb").close()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{value!r} cannot be read: {e.strerror}") from e
    return value


def port(value: str) -> int:
    try:
        port = int(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from e
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number")
    return port


def memory_size(value: str) -> str:
    """An NGINX size for the records' shared memory; nginx.conf gets it verbatim."""
    try:
        size = size_bytes(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    if size < 1 << 20:
        raise argparse.ArgumentTypeError(f"{value!r} is less than 1m")
    return value


def positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from e
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not positive")
    return number


def host_suffixes(value: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in (i.strip() for i in value.split(",") if i.strip()):
        namespace, sep, suffix = item.partition("=")
        problem = (
            "is not NAMESPACE=SUFFIX"
            if not sep
            else validation.dns1123_label(namespace)
            or (validation.dns1123_subdomain(suffix) if suffix != "*" else None)
        )
        if problem:
            raise argparse.ArgumentTypeError(f"{item!r} {problem}")
        pairs.append((namespace, suffix))
    return tuple(pairs)


def namespaced_name(value: str) -> tuple[str, str]:
    namespace, sep, name = value.partition("/")
    problem = (
        "is not NAMESPACE/NAME"
        if not sep
        else validation.dns1123_label(namespace) or validation.dns1123_subdomain(name)
    )
    if problem:
        raise argparse.ArgumentTypeError(f"{value!r} {problem}")
    return namespace, name


def hosts(value: str) -> tuple[str, ...]:
    hosts = tuple(h.strip() for h in value.split(",") if h.strip())
    for h in hosts:
        try:
            ipaddress.ip_address(h)
        except ValueError:
            if problem := validation.dns1123_subdomain(h):
                raise argparse.ArgumentTypeError(f"{h!r} {problem}") from None
    return hosts


def cidrs(value: str) -> tuple[str, ...]:
    """Networks as NGINX's allow directive reads them, normalised by ipaddress."""
    try:
        return tuple(str(ipaddress.ip_network(c.strip(), strict=False)) for c in value.split(","))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def checked(check: Callable[[str], str | None]) -> Callable[[str], str]:
    """An argparse type from a validation function: flags reach nginx.conf too."""

    def parse(value: str) -> str:
        if problem := check(value):
            raise argparse.ArgumentTypeError(f"{value!r} {problem}")
        return value

    return parse


def uri(value: str) -> str:
    if problem := validation.http_path(value, "Exact"):
        raise argparse.ArgumentTypeError(f"{value!r} {problem}")
    return value


def boolean(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not true or false")


# A GatewayClass controllerName as the CRD's pattern has it: a domain, "/", a path.
_CONTROLLER_NAME = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    r"/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$"
)
# Addresses one flag may hand out: enough for any node, small enough to hold.
MAX_POOL = 4096


def gateway_controller_name(value: str) -> str:
    if len(value) > 253 or not _CONTROLLER_NAME.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a domain-prefixed path")
    return value


def address_pool(value: str) -> tuple[str, ...]:
    """``FIRST-LAST`` (or one address): the IPv4 addresses between, both included."""
    first, _, last = value.strip().partition("-")
    try:
        start = ipaddress.IPv4Address(first.strip())
        end = ipaddress.IPv4Address(last.strip()) if last else start
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r}: {e}") from e
    count = int(end) - int(start) + 1
    if count < 1 or count > MAX_POOL:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a range FIRST-LAST of 1 to {MAX_POOL} addresses"
        )
    return tuple(str(start + i) for i in range(count))
