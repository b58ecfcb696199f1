"""Flags whose values reach nginx.conf or the host policy are checked by the CLI."""

from __future__ import annotations

import pytest

from ferryman import cli


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
def test_bad_values_are_refused(args: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _run(*args)
    assert args[0] in capsys.readouterr().err
