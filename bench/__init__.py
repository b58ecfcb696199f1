"""Benchmarks (not tests): ``./scripts/bench.sh``; see bench/README.md."""
