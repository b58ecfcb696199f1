"""``ferryman migrate``: the report on a directory of ingress-nginx Ingresses, as
the console script prints it, and its exit code (app/migrate.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

FERRYMAN = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "ferryman"
P = "nginx.ingress.kubernetes.io/"


def _ingress(name: str, annotations: dict[str, str], path: str = "/") -> dict[str, Any]:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {
            "ingressClassName": "nginx",
            "rules": [
                {
                    "host": f"{name}.test",
                    "http": {"paths": [{"path": path, "pathType": "Prefix", "backend": backend}]},
                }
            ],
        },
    }


def _run(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FERRYMAN), "migrate", "--manifests", str(directory), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_served_directory_exits_0_and_says_what_each_annotation_becomes(
    tmp_path: Path,
) -> None:
    docs = [
        _ingress("web", {P + "proxy-read-timeout": "120", P + "enable-cors": "true"}),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}},
    ]
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all(docs))
    out = _run(tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Ingress shop/web (class nginx): served" in out.stdout
    assert f"  {P}proxy-read-timeout: served (as nginx.org/proxy-read-timeout" in out.stdout
    assert "  -> nginx.org/proxy-read-timeout: 120s" in out.stdout
    assert "(serve one with --ingress-class nginx)" in out.stdout


def test_a_snippet_a_typo_and_an_unapplied_one_in_json_exit_1(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    _ingress("snip", {P + "server-snippet": "return 200;"}),
                    _ingress("typo", {P + "proxy-conect-timeout": "3", P + "mirror-target": "x"}),
                ],
            }
        )
    )
    out = _run(tmp_path, "--output", "json")
    assert out.returncode == 1
    snip, typo = json.loads(out.stdout)
    assert snip["verdict"] == "rejected"
    assert snip["annotations"][0]["verdict"] == "refused"
    assert typo["verdict"] == "served with warnings"
    assert [a["verdict"] for a in typo["annotations"]] == ["not applied yet", "unknown (misspelt?)"]


def test_not_a_directory_exits_2(tmp_path: Path) -> None:
    out = _run(tmp_path / "missing")
    assert out.returncode == 2 and "is not a directory" in out.stderr
