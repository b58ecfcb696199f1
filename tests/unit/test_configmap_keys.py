"""Every ConfigMap watched for a kind that needs them (Gateway API's
BackendTLSPolicy) is held with the keys those kinds read, the named
--nginx-configmaps ones whole (sources/kubernetes.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.engine.kind_spec import KindSpec
from ferryman.kinds import REGISTRY
from ferryman.sources.kubernetes import configmap_keys, keys_only


def _cm(namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "7"},
        "data": data,
        "binaryData": {"blob": "AAAA"},
    }


def test_the_registered_kinds_read_ca_crt_only() -> None:
    assert configmap_keys(REGISTRY) == {"ca.crt"}


def test_a_kind_needing_configmaps_without_naming_keys_reads_them_whole() -> None:
    whole = KindSpec("Whole", "example.test", "v1", "wholes", needs=("ConfigMap",))
    assert configmap_keys((*REGISTRY, whole)) is None


def test_other_configmaps_keep_the_keys_read_and_the_named_stay_whole() -> None:
    project = keys_only(frozenset({"ca.crt"}), frozenset({("ic", "nginx-config")}))
    bundle = _cm("app", "bundle", {"ca.crt": "PEM", "dashboard.json": "x" * 10_000})
    assert project(bundle) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": bundle["metadata"],
        "data": {"ca.crt": "PEM"},
    }
    named = _cm("ic", "nginx-config", {"server-tokens": "false"})
    assert project(named) == named
    # The same name in another namespace is not the named one.
    assert project(_cm("app", "nginx-config", {"server-tokens": "false"}))["data"] == {}


@given(data=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=6))
def test_what_is_kept_is_exactly_the_keys_read(data: dict[str, str]) -> None:
    kept = keys_only(frozenset({"ca.crt", "a"}), frozenset())(_cm("ns", "cm", data))["data"]
    assert kept == {k: v for k, v in data.items() if k in ("ca.crt", "a")}
