"""kube/writers.py's pure part: the JSON merge patch a status update applies where
RBAC grants update but not patch (NIC's ClusterRole)."""

from __future__ import annotations

from ferryman.kube.writers import merged_into


def test_a_merge_patch_merges_objects_replaces_lists_and_deletes_nulls() -> None:
    doc = {
        "metadata": {"name": "cafe", "resourceVersion": "7"},
        "spec": {"host": "cafe.example.com"},
        "status": {"state": "Warning", "externalEndpoints": [{"ip": "192.0.2.1"}], "x": 1},
    }
    patch = {
        "metadata": {"resourceVersion": "7"},
        "status": {"state": "Valid", "externalEndpoints": None, "message": "ok"},
    }
    assert merged_into(doc, patch) == {
        "metadata": {"name": "cafe", "resourceVersion": "7"},
        "spec": {"host": "cafe.example.com"},
        "status": {"state": "Valid", "x": 1, "message": "ok"},
    }
    assert doc["status"]["state"] == "Warning"  # the read object is left as it was
    lists = merged_into({"a": [1, 2]}, {"a": [3], "b": {"c": None}})
    assert lists == {"a": [3], "b": {}}
