#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, lint, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$HOME/.local/bin:$PATH"
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy src
.venv/bin/lint-imports
.venv/bin/pytest "$@"
