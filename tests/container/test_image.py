"""The image, run as deploy/deployment.yaml runs it, serves traffic.

scripts/build-image.sh builds the Dockerfile with Debian's podman on a debootstrap
base (scripts/test.sh builds it before pytest; here it is found in the cache). The
container gets what the Deployment asks a kubelet for: its user, a read-only root
filesystem, no capabilities, no privilege escalation, the default seccomp profile,
the sysctl for ports 80/443, the memory limit, and the state volume as a kubelet
makes an emptyDir (root's, mode 0777); its args are the Deployment's, in manifests
mode. It joins a network namespace of its own (the pod's), with an echo backend in
it; the test sends HTTP from this machine's side of the veth link.
"""

from __future__ import annotations

import contextlib
import resource
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from testkit.harness import (
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
)
from testkit.netns import BackendHost

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "build-image.sh"
DEPLOYMENT = ROOT / "deploy" / "deployment.yaml"
MANIFESTS = "/etc/ferryman/manifests"
PODMAN = ["podman", "--runtime", "runc"]  # crun fails on this machine class's cgroups


# The server in the image: Debian's NGINX 1.22 (the default image), or NGINX
# 1.30.4 or Angie 1.12.1 built into it by Dockerfile.server.
SERVERS = ("nginx", "nginx-1.30", "angie")


@pytest.fixture(scope="session", params=SERVERS)
def image(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(the server, the image's name)."""
    server = request.param
    args = [str(BUILD)] if server == "nginx" else [str(BUILD), server]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30 * 60)
    if out.returncode != 0:
        raise RuntimeError(f"image build failed:\n{out.stderr[-4000:]}")
    return server, out.stdout.strip().splitlines()[-1]


@pytest.fixture
def pod_network() -> Iterator[BackendHost]:
    host = BackendHost("pod", prefix="fc", net="10.232")
    host.create()
    yield host
    host.destroy()


def _pod_spec() -> dict[str, Any]:
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    return dict(deployment["spec"]["template"]["spec"])


def _podman_memory(quantity: str) -> str:
    """A Kubernetes quantity (``1Gi``) as podman writes it (``1g``)."""
    units = {"Ki": "k", "Mi": "m", "Gi": "g"}
    return quantity[:-2] + units[quantity[-2:]] if quantity[-2:] in units else quantity


def _run_options(pod: dict[str, Any], state: Path, manifests: Path) -> list[str]:
    """podman's words for what deploy/deployment.yaml asks of the kubelet."""
    (container,) = pod["containers"]
    pod_sc, sc = pod["securityContext"], container["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    # podman applies its default seccomp profile, as RuntimeDefault asks.
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    opts = ["--user", f"{pod_sc['runAsUser']}:{pod_sc['runAsGroup']}"]
    opts += [f"--sysctl={s['name']}={s['value']}" for s in pod_sc["sysctls"]]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    # A kubelet mounts no tmpfs of its own on a read-only root; podman would.
    opts += ["--read-only", "--read-only-tmpfs=false", "--security-opt=no-new-privileges"]
    opts += [f"--cap-drop={cap}" for cap in sc["capabilities"]["drop"]]
    opts += ["--memory", _podman_memory(container["resources"]["limits"]["memory"])]
    (mount,) = container["volumeMounts"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume == {"name": "state", "emptyDir": {}}
    opts += ["--volume", f"{state}:{mount['mountPath']}", "--volume", f"{manifests}:{MANIFESTS}:ro"]
    opts += ["--env=POD_NAME=ferryman-test", "--env=POD_NAMESPACE=ferryman"]
    return opts


def _ports(pod: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in pod["containers"][0]["ports"]}


def _limits() -> list[str]:
    """runc may not raise limits past the host's (no CAP_SYS_RESOURCE here)."""

    def at_most(limit: int, cap: int) -> int:
        soft = resource.getrlimit(limit)[0]
        return cap if soft == resource.RLIM_INFINITY else min(soft, cap)

    nofile, nproc = at_most(resource.RLIMIT_NOFILE, 16384), at_most(resource.RLIMIT_NPROC, 4096)
    return [f"--ulimit=nofile={nofile}:{nofile}", f"--ulimit=nproc={nproc}:{nproc}"]


def _write(manifests: Path, name: str, docs: list[dict[str, Any]]) -> None:
    tmp = manifests / f".{name}.tmp"
    tmp.write_text(yaml.safe_dump_all(docs))
    tmp.replace(manifests / f"{name}.yaml")


def _pod_volumes(tmp_path: Path, pod_network: BackendHost) -> tuple[Path, Path]:
    """The state volume (as a kubelet makes an emptyDir: root's, 0777) and the
    manifests folder, with an Ingress web.test to a backend in the pod's network."""
    state, manifests = tmp_path / "state", tmp_path / "manifests"
    state.mkdir()
    state.chmod(0o777)
    manifests.mkdir()
    tmp_path.chmod(0o755)
    app = pod_network.start("app")
    docs = service_with_backends("app", [app])
    _write(manifests, "app", [*docs, ingress("web", [rule("web.test", path("/", "app"))])])
    return state, manifests


def _logs_of(name: str) -> Callable[[], str]:
    """The container's output so far, as ``podman logs`` gives it."""

    def logs() -> str:
        out = subprocess.run([*PODMAN, "logs", name], capture_output=True, text=True)
        return out.stdout + out.stderr

    return logs


def _wait_ready(name: str, url: str, logs: Callable[[], str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = subprocess.run(
            [*PODMAN, "inspect", "--format", "{{.State.Running}}", name],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        if running != "true":
            raise AssertionError(f"the container exited:\n{logs()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"not ready after {timeout}s:\n{logs()}")


def test_image_runs_as_deploy_runs_it_and_serves(
    tmp_path: Path, image: tuple[str, str], pod_network: BackendHost
) -> None:
    server, name_of_image = image
    pod = _pod_spec()
    state, manifests = _pod_volumes(tmp_path, pod_network)

    name = f"ferryman-test-{tmp_path.name}"[:60]
    (container,) = pod["containers"]
    run = [
        *PODMAN, "run", "--detach", "--name", name,
        f"--network=ns:/run/netns/{pod_network.netns}", *_limits(),
        *_run_options(pod, state, manifests),
        name_of_image, *container["args"], f"--manifests={MANIFESTS}",
        "--shutdown-grace-period=1",  # the Deployment's 15 s, shortened for the test
        # The chart's controller.dataPlane=angie; NGINX 1.30 is found by its name.
        *(["--data-plane=angie"] if server == "angie" else []),
    ]  # fmt: skip
    subprocess.run(run, check=True, capture_output=True, text=True, timeout=120)
    ports = _ports(pod)
    base = f"http://{pod_network.address}"

    logs = _logs_of(name)

    try:
        _wait_ready(name, f"{base}:{ports['readiness']}/nginx-ready", logs)
        r = httpx.get(f"{base}:{ports['http']}/x", headers={"Host": "web.test"}, timeout=5)
        assert r.status_code == 200 and r.json()["name"] == "app", logs()
        assert r.headers["server"] == ("Angie" if server == "angie" else "nginx")
        # The module built in the Dockerfile's first stage (or with the server,
        # beside it in /opt/server) is the fast path.
        assert "runs_in=ngx_http_ferryman_module" in logs()
        modules = "/usr/lib/nginx/modules" if server == "nginx" else "/opt/server/modules"
        assert f"module={modules}/ngx_http_ferryman_module.so" in logs()

        # A manifest written afterwards is served too (the mounted folder is watched).
        other = pod_network.start("other")
        more = service_with_backends("other", [other])
        _write(manifests, "other", [*more, ingress("o", [rule("o.test", path("/", "other"))])])

        def other_serves() -> bool:
            r = httpx.get(f"{base}:{ports['http']}/", headers={"Host": "o.test"}, timeout=5)
            return r.status_code == 200 and r.json()["name"] == "other"

        eventually(other_serves, 60, "the new Ingress served")
        metrics = httpx.get(f"{base}:{ports['metrics']}/metrics", timeout=5).text
        assert "nginx_ingress_controller_nginx_last_reload_status" in metrics
        # Everything written is in ferryman's own folder of the volume.
        assert (state / "ferryman-101" / "nginx.conf").exists()

        # SIGTERM (as a kubelet stops a pod, SIGKILL after the pod's grace) ends it
        # cleanly, after the shutdown grace period.
        grace = str(pod["terminationGracePeriodSeconds"])
        subprocess.run([*PODMAN, "stop", "--time", grace, name], check=True, capture_output=True)
        code = subprocess.run(
            [*PODMAN, "inspect", "--format", "{{.State.ExitCode}}", name],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert code == "0", logs()
        assert "still serving for the grace period" in logs()
        assert "Traceback" not in logs()
    finally:
        subprocess.run([*PODMAN, "rm", "--force", name], capture_output=True)


# As a container runtime starts a user other than root that asks for a
# capability: in its permitted and effective sets, never inheritable or ambient
# (podman, unlike containerd and CRI-O, raises it as ambient too; this undoes that
# before ferryman's own code runs, in its process).
_AS_A_KUBELET_STARTS_IT = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(47, 4, 0, 0, 0) == 0  # PR_CAP_AMBIENT_CLEAR_ALL
header = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
assert libc.capget(header, data) == 0
data[2] = data[5] = 0  # inheritable
assert libc.capset(header, data) == 0
from ferryman.app.launch import main
sys.argv[0] = "ferryman"
sys.exit(main())
"""


@pytest.mark.parametrize("image", ["nginx"], indirect=True)
def test_nics_pod_settings_bind_ports_80_and_443_with_net_bind_service(
    tmp_path: Path, image: tuple[str, str], pod_network: BackendHost
) -> None:
    """NIC's Deployment runs its controller as user 101 with every capability
    dropped but NET_BIND_SERVICE, no privilege escalation, and no sysctl for low
    ports: ferryman passes the capability on to NGINX, which listens on 80."""
    _, name_of_image = image
    pod = _pod_spec()
    state, manifests = _pod_volumes(tmp_path, pod_network)
    options = [o for o in _run_options(pod, state, manifests) if not o.startswith("--sysctl")]
    options += [
        "--cap-add=NET_BIND_SERVICE",
        # The kernel's default, which a kubelet leaves as it is.
        "--sysctl=net.ipv4.ip_unprivileged_port_start=1024",
    ]
    name = f"ferryman-nic-{tmp_path.name}"[:60]
    (container,) = pod["containers"]
    run = [
        *PODMAN, "run", "--detach", "--name", name,
        f"--network=ns:/run/netns/{pod_network.netns}", *_limits(), *options,
        "--entrypoint", "/opt/ferryman/bin/python", name_of_image, "-c", _AS_A_KUBELET_STARTS_IT,
        *container["args"], f"--manifests={MANIFESTS}", "--shutdown-grace-period=1",
    ]  # fmt: skip
    subprocess.run(run, check=True, capture_output=True, text=True, timeout=120)
    ports = _ports(pod)
    assert ports["http"] == 80 and ports["https"] == 443
    base = f"http://{pod_network.address}"

    logs = _logs_of(name)

    try:
        _wait_ready(name, f"{base}:{ports['readiness']}/nginx-ready", logs)
        r = httpx.get(f"{base}:80/x", headers={"Host": "web.test"}, timeout=5)
        assert r.status_code == 200 and r.json()["name"] == "app", logs()
    finally:
        subprocess.run([*PODMAN, "rm", "--force", name], capture_output=True)
