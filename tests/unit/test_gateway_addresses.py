"""Which address each Gateway gets (kinds/gateway/records/addresses.py): what it asks
for when it can be had, the reason when it cannot (UnsupportedAddress,
AddressNotUsable, AddressNotAssigned), and never one address for two Gateways."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.gateway.records.addresses import Asking, NoAddress, assign
from ferryman.kinds.gateway.records.servers import ANY_ADDRESS

POOL = ("10.0.0.1", "10.0.0.2", "10.0.0.3")


def _none(key: tuple[str, str]) -> str | None:
    return None


def _ask(name: str, *values: str, kind: str = "IPAddress") -> Asking:
    return Asking(("infra", name), tuple((kind, v) for v in values))


def _outcomes(*gateways: Asking, pool: tuple[str, ...] = POOL, shared: tuple[str, ...] = ()):
    return assign(gateways, pool, {}, _none, shared)[1]


def test_an_address_type_other_than_ip_is_not_accepted() -> None:
    out = _outcomes(_ask("a", "fake address teehee!", kind="test/fake-invalid-type"))
    assert out[("infra", "a")] == NoAddress(
        False,
        "UnsupportedAddress",
        'address type "test/fake-invalid-type" is not supported: ferryman serves Gateways '
        "on IP addresses",
    )
    out = _outcomes(_ask("b", "10.0.0.256"), _ask("c", kind="Hostname"))
    assert out[("infra", "b")] == NoAddress(
        False, "UnsupportedAddress", '"10.0.0.256" is not an IP address'
    )


def test_an_address_outside_the_pool_or_in_use_is_not_usable() -> None:
    out = _outcomes(_ask("old", "10.0.0.2"), _ask("new", "10.0.0.2"), _ask("out", "192.0.2.7"))
    assert out[("infra", "old")] == "10.0.0.2"
    assert out[("infra", "new")] == NoAddress(
        True, "AddressNotUsable", "10.0.0.2 is in use by Gateway infra/old"
    )
    assert out[("infra", "out")] == NoAddress(
        True, "AddressNotUsable", "192.0.2.7 is not in --gateway-addresses"
    )
    two = _outcomes(_ask("two", "10.0.0.1", "10.0.0.3"))[("infra", "two")]
    assert two == NoAddress(
        True, "AddressNotUsable", "ferryman gives a Gateway one address; 2 are asked for"
    )


def test_dropping_the_unusable_address_gives_the_usable_one() -> None:
    # GatewayStaticAddresses' steps: an unusable and a usable address, then only the usable.
    assigned, out = assign([_ask("gw", "192.0.2.7", "10.0.0.3")], POOL, {}, _none)
    assert isinstance(out[("infra", "gw")], NoAddress) and assigned == {}
    assigned, out = assign([_ask("gw", "10.0.0.3")], POOL, assigned, _none)
    assert out[("infra", "gw")] == "10.0.0.3" and assigned == {("infra", "gw"): "10.0.0.3"}


def test_without_a_pool_only_the_shared_addresses_may_be_asked_for() -> None:
    out = _outcomes(_ask("any"), _ask("same", "10.1.1.1"), pool=(), shared=("10.1.1.1",))
    assert out == {("infra", "any"): ANY_ADDRESS, ("infra", "same"): ANY_ADDRESS}
    out = _outcomes(_ask("other", "10.1.1.2"), pool=(), shared=("10.1.1.1",))
    assert out[("infra", "other")] == NoAddress(
        True,
        "AddressNotUsable",
        "10.1.1.2 is not an address ferryman serves Gateways on: without "
        "--gateway-addresses they share 10.1.1.1",
    )


_requests = st.lists(
    st.lists(st.sampled_from((*POOL, "10.9.9.9")), max_size=2), min_size=1, max_size=6
)


@given(first=_requests, second=_requests)
def test_no_address_is_given_twice_and_kept_ones_stay(first, second) -> None:
    """Over two batches: every Gateway gets an outcome, no two share an address,
    an address asked for is the one given, and a Gateway that asks for nothing
    keeps what it had."""
    assigned: dict[tuple[str, str], str] = {}
    for batch in (first, second):
        gateways = [_ask(f"g{i}", *values) for i, values in enumerate(batch)]
        before = dict(assigned)
        assigned, out = assign(gateways, POOL, assigned, _none)
        assert set(out) == {g.key for g in gateways}
        given_out = [a for a in out.values() if isinstance(a, str)]
        assert len(given_out) == len(set(given_out)) and set(given_out) <= set(POOL)
        assert assigned == {k: a for k, a in out.items() if isinstance(a, str)}
        for g in gateways:
            got = out[g.key]
            if g.addresses and isinstance(got, str):
                assert [got] == sorted({v for _, v in g.addresses})
            if not g.addresses and g.key in before:
                assert got == before[g.key]
