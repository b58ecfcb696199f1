#!/usr/bin/env bash
# Builds Angie 1.12.1 with the Lua runtime and ferryman's modules from the
# vendored sources, as `scripts/build-nginx.sh angie` does (it is that build:
# one records data plane on every server, issue 26). The last line on stdout is
# the binary's absolute path; `ferryman run --data-plane angie
# --data-plane-binary PATH` alone runs it (ferryman finds the modules and Lua
# libraries beside it). Cached by input hash like every build here.
exec "$(dirname "$0")/build-nginx.sh" angie
