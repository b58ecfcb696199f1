"""NGINX chooses among a VirtualServer route's ``matches`` exactly as
``ferryman.kinds.virtualserver.records.locations.first_match`` predicts: NIC's condition values
(caseless strings, ``!`` negation, ``~``/``~*`` regular expressions, never on an
empty value), all conditions of a match, the first match that holds, else the
route's own action; on headers, arguments and cookies, per request in
ngx_http_ferryman_module (``vs_fast``).

One ferryman serves every example: each rewrites the VirtualServer and waits for
a marker route only it has.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.record_text import unquote
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.records.locations import first_match, source_variable
from testkit import router_kit as kit
from testkit.harness import (
    Backends,
    Ferryman,
    fast_path_counts,
)

HOST = "vs-match.example.com"
MATCHED = ("a", "b", "c")  # the first, second and third match's upstream
DEFAULT, MARKER = "e", "d"
SOURCES = [("header", "X-A"), ("header", "x-b"), ("argument", "q"), ("cookie", "c")]
WORDS = ["a", "b", "ab", "A", "Ab", ""]
REGEXES = ["~^a", "~b$", "~*^A", "~*B"]


_value = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(REGEXES),
    st.sampled_from(WORDS + REGEXES).map("!{}".format),
)
_condition = st.tuples(st.sampled_from(SOURCES), _value)
_matches = st.lists(st.lists(_condition, min_size=1, max_size=2), min_size=1, max_size=3)
# One request: a value (or none) for each source.
_request = st.fixed_dictionaries({s: st.sampled_from(WORDS) for s in SOURCES})
_requests = st.lists(_request, min_size=20, max_size=20)

Conditions = list[tuple[tuple[str, str], str]]


def manifest(matches: list[Conditions], marker: str) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "matcher", "namespace": "default"},
        "spec": {
            "host": HOST,
            "upstreams": [
                {"name": s, "service": s, "port": 80} for s in (*MATCHED, DEFAULT, MARKER)
            ],
            "routes": [
                {
                    "path": "/",
                    "matches": [
                        {
                            "conditions": [{kind: name, "value": v} for (kind, name), v in m],
                            "action": {"pass": MATCHED[i]},
                        }
                        for i, m in enumerate(matches)
                    ],
                    "action": {"pass": DEFAULT},
                },
                {"path": f"={marker}", "action": {"pass": MARKER}},
            ],
        },
    }


def predicted(matches: list[Conditions], request: dict[tuple[str, str], str]) -> str:
    variables = {source_variable(kind, name): v for (kind, name), v in request.items()}
    tables = [[(source_variable(k, n), unquote(v)) for (k, n), v in m] for m in matches]
    found = first_match(tables, variables)
    return DEFAULT if found is None else MATCHED[found]


class Client(kit.HostClient):
    """Also sends a drawn request's headers, arguments and cookies."""

    def served_by(self, path: str, request: dict[tuple[str, str], str] | None = None) -> str:
        headers, params, cookies = {"Host": HOST}, {}, []
        for (kind, name), value in (request or {}).items():
            if not value:
                continue
            if kind == "header":
                headers[name] = value
            elif kind == "argument":
                params[name] = value
            else:
                cookies.append(f"{name}={value}")
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        return self.ask(path, headers, **params)


@pytest.fixture
def matcher(ferryman: Ferryman, backends: Backends) -> Iterator[tuple[Ferryman, Client]]:
    ferryman.write("vs", manifest([[(SOURCES[0], "a")]], "/marker-start"))
    yield from kit.serve(ferryman, backends, (*MATCHED, DEFAULT, MARKER), Client(ferryman, HOST))


@kit.examples(20)
@given(matches=_matches, requests=_requests)
def test_matches_choose_like_first_match(
    matcher: tuple[Ferryman, Client],
    matches: list[Conditions],
    requests: list[dict[tuple[str, str], str]],
) -> None:
    ferryman, client = matcher
    marker = kit.new_marker()
    obj = manifest(matches, marker)
    assert parse_virtual_server(obj).problems == ()
    ferryman.write("vs", obj)
    kit.await_marker(client, marker, MARKER)
    before = fast_path_counts(ferryman)
    answers = [(r, predicted(matches, r), client.served_by("/", r)) for r in requests]
    wrong = [(r, want, got) for r, want, got in answers if want != got]
    assert not wrong, f"matches={matches}: (request, reference says, NGINX answered) {wrong}"
    # ngx_http_ferryman_module chose them all (vs_fast), none went to Lua.
    after = fast_path_counts(ferryman)
    assert (after[0] - before[0], after[1] - before[1]) == (len(answers), 0)
