#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, lint, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$HOME/.local/bin:$PATH"
# What the tests themselves run besides ferryman's own needs: iptables (a
# black-holed endpoint in a network namespace, test_connect_timeout.py). Podman
# brings it too, but the image is built beside the tests now, minutes later.
command -v iptables >/dev/null || scripts/apt-install.sh test iptables
.venv/bin/ruff check src tests bench examples testkit
.venv/bin/ruff format --check src tests bench examples testkit
.venv/bin/mypy src
.venv/bin/lint-imports
# NGINX 1.30.4 and Angie 1.12.1 with their Lua runtime and ferryman's modules
# for the nginx-1.30 and angie flavours' tests (1-3 min each cold, cached by
# input hash); the data-plane tests need them, so they come first.
./scripts/build-nginx.sh >/dev/null
./scripts/build-angie.sh >/dev/null
# What only the cluster tests use, built beside the unit and data-plane tests
# (a cold machine spends minutes here, which used to hold back every test):
# the Go tools, before pytest (whose per-test timeout would cut a cold build
# short; warm runs find them cached by input hash); the Gateway API
# conformance suite and echo-basic (about 1.5 min cold); the container image
# (podman on a debootstrap base) and the same on NGINX 1.30 and Angie
# (Dockerfile.server, a few minutes each cold, cached by input hash).
cluster_builds() {
  tools/testapiserver/build.sh >/dev/null
  tools/helm/build.sh >/dev/null
  tools/conformance/build.sh >/dev/null
  ./scripts/build-image.sh >/dev/null
  ./scripts/build-image.sh nginx-1.30 >/dev/null
  ./scripts/build-image.sh angie >/dev/null
}
# pytest: the cluster tests (one API server, its controllers and kubelets, the
# images; mostly waiting on them) in one process, beside the unit and
# data-plane tests on two workers (pytest-xdist; a file's tests stay on one
# worker, so its module fixtures start once). Its report follows theirs.
# Naming a test or a directory runs just that, in one process.
for arg in "$@"; do
  if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then
    cluster_builds
    exec .venv/bin/pytest "$@"
  fi
done
cluster_log=$(mktemp)
trap 'rm -f "$cluster_log"' EXIT
# --durations: where the time goes (issue 31 item 5), in every run's report.
(
  set -e
  cluster_builds
  exec .venv/bin/pytest --durations=25 tests/kubernetes tests/gateway tests/container "$@"
) >"$cluster_log" 2>&1 &
cluster=$!
rc=0
.venv/bin/pytest -n "${FERRYMAN_TEST_WORKERS:-2}" --dist loadfile --durations=25 tests/unit tests/integration "$@" || rc=$?
wait "$cluster" || rc=$((rc ? rc : $?))
cat "$cluster_log"
exit "$rc"
