#!/usr/bin/env bash
# The benchmark suite (not tests): real NGINX, real loopback backends, wrk.
# Results: bench/results/latest.json and latest.png. Arguments pass through
# (e.g. --sizes 100,1000 --samples 10).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$HOME/.local/bin:$PATH"
if ! command -v wrk >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get install -y -qq wrk >/dev/null
fi
uv sync --quiet --frozen --group bench
exec .venv/bin/python -m bench.run "$@"
