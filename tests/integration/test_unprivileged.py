"""ferryman as a non-root user, as the image runs it (uid 101), on a state dir it
does not own: a Kubernetes emptyDir is root's, mode 0777."""

from __future__ import annotations

import stat

import pytest

from testkit.harness import (
    ROOT,
    Backends,
    Ferryman,
    ingress,
    path,
    reachable,
    rule,
    served_by,
    service_with_backends,
)

UID = 101  # the image's user (Dockerfile, deploy/deployment.yaml)
AS_UID = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]


@pytest.fixture(autouse=True)
def _checkout_reachable() -> None:
    """uid 101 runs this checkout's .venv/bin/ferryman: a checkout made by
    ``mktemp -d`` (0700) would refuse it before ferryman's first line."""
    reachable(ROOT)


def test_non_root_on_a_root_owned_0777_state_dir_serves(
    ferryman: Ferryman, backends: Backends
) -> None:
    ferryman.state.mkdir()
    ferryman.state.chmod(0o777)
    assert ferryman.state.stat().st_uid == 0  # the tests run as root, as the kubelet
    ferryman.command_prefix = AS_UID
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("ing", ingress("web", [rule("web.test", path("/", "app"))]))
    ferryman.start()

    assert served_by(ferryman, "web.test", "/") == "app"
    # Everything lives in a folder of ferryman's own, closed to others.
    own = ferryman.state / f"ferryman-{UID}"
    st = own.stat()
    assert st.st_uid == UID and stat.S_IMODE(st.st_mode) == 0o711
    assert (own / "nginx.conf").exists()


def test_a_state_dir_it_cannot_write_is_a_clear_error(ferryman: Ferryman) -> None:
    ferryman.state.mkdir(mode=0o755)
    ferryman.command_prefix = AS_UID
    ferryman.start(wait=False)
    assert ferryman.proc is not None
    assert ferryman.proc.wait(30) == 2
    assert f"--state-dir {ferryman.state}: Permission denied (ferryman is uid {UID})" in (
        ferryman.logs()
    )


def test_a_folder_planted_by_another_user_is_refused(ferryman: Ferryman) -> None:
    ferryman.state.mkdir()
    ferryman.state.chmod(0o777)
    (ferryman.state / f"ferryman-{UID}").mkdir()  # root's, not ferryman's
    ferryman.command_prefix = AS_UID
    ferryman.start(wait=False)
    assert ferryman.proc is not None
    assert ferryman.proc.wait(30) == 2
    assert "is not uid 101's folder" in ferryman.logs()
