#!/usr/bin/env bash
# The Gateway API conformance suite (v1.6.3, profiles GATEWAY-HTTP and GATEWAY-TLS)
# against ferryman,
# alone: tests/gateway/test_conformance.py on the test cluster (test apiserver with
# Kubernetes' controllers, the test kubelet running the suite's echo-basic pods).
# A full run copies the suite's ConformanceReport to docs/gateway-conformance/report.yaml.
#
#   scripts/gateway-conformance.sh            # every core test; keeps the report
#   scripts/gateway-conformance.sh NAME       # one test (-run-test), report not kept
#
#   FERRYMAN_CONFORMANCE_SKIP_TESTS=A,B       # tests to skip (report not kept either)
#   FERRYMAN_CONFORMANCE_PROFILES=A           # one profile (report not kept either)
#   FERRYMAN_CONFORMANCE_SERVER=angie         # or nginx-1.30: that server instead of
#                                             # Debian's NGINX (report not kept either)
#   FERRYMAN_CONFORMANCE_OUT=DIR              # the run's report, suite and ferryman logs
#                                             # (default: a fresh temporary directory)
# Needs root (network namespaces, ports 80/443/8080 on 127.0.0.x) and the project's
# set-up (scripts/setup.sh); the Go tools are built first, cached by input hash.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"

only="${1:-}"
out="${FERRYMAN_CONFORMANCE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ferryman-conformance.XXXXXX")}"
mkdir -p "$out"
export FERRYMAN_CONFORMANCE_OUT="$out"
if [[ -n "$only" ]]; then
    export FERRYMAN_CONFORMANCE_RUN_TEST="$only"
fi

# Cold builds take minutes: outside pytest's per-test timeout.
tools/testapiserver/build.sh >/dev/null
tools/conformance/build.sh >/dev/null

status=0
.venv/bin/pytest -p no:cacheprovider -s -q tests/gateway/test_conformance.py || status=$?

if [[ -z "$only" && -z "${FERRYMAN_CONFORMANCE_SKIP_TESTS:-}" && -z "${FERRYMAN_CONFORMANCE_PROFILES:-}" && -z "${FERRYMAN_CONFORMANCE_SERVER:-}" && -f "$out/report.yaml" ]]; then
    mkdir -p docs/gateway-conformance
    cp "$out/report.yaml" docs/gateway-conformance/report.yaml
    echo "report: docs/gateway-conformance/report.yaml"
fi
echo "logs: $out"
exit "$status"
