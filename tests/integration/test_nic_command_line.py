"""ferryman started with NIC's command line, as NIC's manifests write it: Go
flags, NIC's names, no subcommand."""

from __future__ import annotations

import subprocess
from pathlib import Path

from testkit.harness import (
    FERRYMAN,
    Backends,
    Ferryman,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)


def test_nic_flags_alone_bring_up_ferryman_serving_class_nginx(
    tmp_path: Path, backends: Backends
) -> None:
    # No -ingress-class, as in NIC's manifests: NIC's default class, nginx.
    f = Ferryman(tmp_path, nic_flags=True)
    f.write("svc", service_with_backends("cafe", [backends.start("cafe")]))
    f.write("cafe", ingress("cafe", [rule("cafe.example.com", path("/", "cafe"))],
                            class_name="nginx"))  # fmt: skip
    f.start()
    try:
        assert served_by(f, "cafe.example.com", "/") == "cafe"
        assert "nginx_ingress_controller_nginx_reloads_total" in str(f.metrics())
    finally:
        f.stop()


def test_an_unknown_nic_flag_exits_with_one_line_naming_what_to_use(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(FERRYMAN), "-ingress-class=nginx", "-enable-snippets", f"-state-dir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "ferryman run: -enable-snippets=true is not supported: snippets are refused by "
        "design: nothing a user writes becomes NGINX text (see ferryman run --help)\n"
    )
