"""The dependency index: who is translated again when an object changes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferryman.engine.dependencies import ANY, Dependencies
from ferryman.resources.meta import ObjectRef

VS = ObjectRef("VirtualServer", "shop", "cafe")
ING = ObjectRef("Ingress", "shop", "cafe")
TLS = ObjectRef("Secret", "shop", "tls")
POL = ObjectRef("Policy", "shop", "limit")


def test_users_are_who_declared_reading_it() -> None:
    deps = Dependencies()
    deps.declare(VS, {TLS, POL})
    deps.declare(ING, {TLS})
    assert deps.users(TLS) == {VS, ING}
    assert deps.users(POL) == {VS}
    assert deps.users(ObjectRef("Secret", "shop", "other")) == set()


def test_declaring_again_replaces_and_names_what_is_no_longer_read() -> None:
    deps = Dependencies()
    deps.declare(VS, {TLS, POL})
    assert deps.declare(VS, {POL}) == {TLS}
    assert deps.users(TLS) == set()
    assert not deps.used(TLS)
    assert deps.declare(VS, ()) == {POL}
    assert deps.uses(VS) == frozenset()


def test_a_read_of_every_object_of_a_kind_in_a_namespace() -> None:
    deps = Dependencies()
    deps.declare(VS, {ObjectRef("VirtualServerRoute", "shop", ANY)})
    assert deps.users(ObjectRef("VirtualServerRoute", "shop", "coffee")) == {VS}
    assert deps.users(ObjectRef("VirtualServerRoute", "other", "coffee")) == set()


refs = st.builds(
    ObjectRef,
    st.sampled_from(["Secret", "Policy"]),
    st.sampled_from(["a", "b"]),
    st.text("xy", max_size=2),
)
users = st.builds(
    ObjectRef, st.just("VirtualServer"), st.just("a"), st.sampled_from(["1", "2", "3"])
)


@given(st.lists(st.tuples(users, st.frozensets(refs, max_size=4)), max_size=12))
def test_users_always_match_the_last_declarations(
    steps: list[tuple[ObjectRef, frozenset[ObjectRef]]],
) -> None:
    deps = Dependencies()
    last: dict[ObjectRef, frozenset[ObjectRef]] = {}
    for user, used in steps:
        deps.declare(user, used)
        last[user] = used
    for ref in {r for used in last.values() for r in used}:
        assert deps.users(ref) == {u for u, used in last.items() if ref in used}


def test_a_read_of_every_object_of_a_kind_in_every_namespace() -> None:
    """NIC's routeSelector picks VirtualServerRoutes of any namespace."""
    deps = Dependencies()
    deps.declare(VS, {ObjectRef("VirtualServerRoute", ANY, ANY)})
    assert deps.users(ObjectRef("VirtualServerRoute", "other", "coffee")) == {VS}
    assert deps.users(ObjectRef("Policy", "other", "coffee")) == set()
