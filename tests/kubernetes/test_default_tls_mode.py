"""--default-server-tls-secret in Kubernetes mode: the Secret the flag names is
read from the API (watched, like Ingress TLS Secrets) and followed without a reload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import Client

from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import Ferryman, tls_secret
from testkit.kubernetes_mode import _ferryman, _start
from testkit.tls import served_names as _names


@pytest.fixture
def running(tmp_path: Path, apiserver: APIServer, namespace: str) -> Iterator[list[Ferryman]]:
    started: list[Ferryman] = []
    yield started
    for f in started:
        if f.proc is not None:
            f.stop()


def test_the_default_server_secret_is_read_from_the_api(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str,
    running: list[Ferryman],
) -> None:  # fmt: skip
    apply(kube, tls_secret("default-tls", ["default.k8s.test"], namespace=namespace))
    flag = f"--default-server-tls-secret={namespace}/default-tls"
    f = _start(running, _ferryman(tmp_path, apiserver, namespace, "a", flag))
    wait_until(
        lambda: _names(f.https_port, "nobody.k8s.test") == ["default.k8s.test"], 60, "served"
    )
    apply(kube, tls_secret("default-tls", ["renewed.k8s.test"], namespace=namespace))
    wait_until(lambda: _names(f.https_port, None) == ["renewed.k8s.test"], 60, "followed")
    assert f.reloads() == 1
