#!/usr/bin/env bash
# Set up .venv (test and lint tools included), check style and types, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test,dev
.venv/bin/ruff check rlpipe tests examples benchmarks
.venv/bin/mypy rlpipe
.venv/bin/python -m pytest "$@"
