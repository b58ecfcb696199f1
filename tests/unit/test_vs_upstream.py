"""kinds/virtualserver/records/upstream.py: the U record's per-request fields and the fields that
stay Warning (hypothesis: any upstream NIC accepts)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.virtualserver.records.upstream import unsupported, upstream_fields
from ferryman.resources.nic_upstream import Upstream

_MAYBE = st.none() | st.integers(min_value=0, max_value=2**40)


@given(
    tls=st.booleans(),
    max_conns=_MAYBE,
    body=_MAYBE,
    timeout=_MAYBE,
    keepalive=_MAYBE,
)
def test_fields_are_five_numbers_without_separators(
    tls: bool, max_conns: int | None, body: int | None, timeout: int | None, keepalive: int | None
) -> None:
    u = Upstream(
        "up",
        "svc",
        None,
        80,
        tls=tls,
        max_conns=max_conns,
        client_max_body_size=body,
        next_upstream_timeout_ms=timeout,
        keepalive=keepalive,
    )
    fields = upstream_fields(u).split(".")
    assert len(fields) == 5
    assert all(f == "-" or f.isdigit() for f in fields)
    assert fields[0] == ("1" if tls else "0")
    # max_conns=0 and a zero timeout are NGINX's "no limit"; a body limit is
    # carried as is, above the server's too (0: none), and never warns.
    assert fields[1] == (str(max_conns) if max_conns else "-")
    assert fields[3] == (str(timeout) if timeout else "-")
    assert fields[2] == ("-" if body is None else str(body))
    assert "client-max-body-size" not in unsupported(u)


def test_directives_without_variables_are_named() -> None:
    u = Upstream(
        "up",
        "svc",
        None,
        80,
        next_upstream=("error", "timeout", "http_502"),
        buffering=False,
        buffer_size=8192,
        client_body_buffer_size=8192,
        type="grpc",
        subselector=(("version", "v1"),),
    )
    assert sorted(unsupported(u)) == [
        "buffering,buffer-size",  # gRPC: grpc_pass takes no proxy buffers
        "client-body-buffer-size",
        "next-upstream",
        "subselector",
    ]  # type: grpc is served (kinds/virtualserver/records/grpc.py)
    assert unsupported(Upstream("up", "svc", None, 80, next_upstream=("timeout", "error"))) == {}
