"""The real kube-apiserver of tools/testapiserver, as a test fixture's process."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from lightkube import Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "tools" / "testapiserver" / "build.sh"


def build() -> Path:
    """Builds (or finds in the cache) the binary; a cold build takes minutes."""
    out = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=45 * 60, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"testapiserver build failed:\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


class APIServer:
    def __init__(self, binary: Path, workdir: Path, *extra: str) -> None:
        self.binary = binary
        self.dir = workdir
        self.extra = extra
        self.proc: subprocess.Popen[str] | None = None
        self.kubeconfig = ""

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        log = (self.dir / "apiserver.log").open("a")
        self.proc = subprocess.Popen(
            [str(self.binary), "--dir", str(self.dir), "--exit-on-stdin-close", *self.extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("KUBECONFIG="):
            self.proc.kill()
            raise RuntimeError(f"testapiserver did not start; see {self.dir / 'apiserver.log'}")
        self.kubeconfig = line.partition("=")[2]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self) -> Client:
        return Client(config=KubeConfig.from_file(self.kubeconfig), field_manager="tests")


def apply(client: Client, *docs: dict[str, Any]) -> None:
    """Create each object, or replace it when it exists (carrying its resourceVersion)."""
    for doc in docs:
        obj = codecs.from_dict(doc)
        try:
            client.create(obj)
        except ApiError as e:
            if e.status.code != 409:
                raise
            current = client.get(type(obj), obj.metadata.name, namespace=obj.metadata.namespace)
            obj.metadata.resourceVersion = current.metadata.resourceVersion
            client.replace(obj)


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def install_crds(kube: Client, *paths: Path) -> None:
    """Creates the CRDs in ``paths`` (those there already stay) and waits until
    the API server serves each (Established)."""
    names = []
    for path in paths:
        for doc in codecs.load_all_yaml(path.read_text()):
            names.append(doc.metadata.name)
            try:
                kube.create(doc)
            except ApiError as e:
                if e.status.code != 409:
                    raise

    def established() -> bool:
        for name in names:
            crd = kube.get(CustomResourceDefinition, name)
            conditions = (crd.status.conditions if crd.status else None) or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    wait_until(established, 60, f"the CRDs {', '.join(names)}")
