#!/usr/bin/env bash
# Set up .venv (test and lint tools included), check style and types, then run the tests.
#   scripts/test.sh               the whole suite (what .ci/run runs)
#   scripts/test.sh --fast        everything but the learning, Ray and crash tests (markers slow, ray, crash)
#   scripts/test.sh [--fast] ...  any other arguments go to pytest, e.g. scripts/test.sh --fast tests/data -x -n 0
set -euo pipefail
cd "$(dirname "$0")/.."
select=()
if [ "${1:-}" = "--fast" ]; then
  shift
  select=(-m "not slow and not ray and not crash")
fi
scripts/setup.sh test,dev,plot  # plot: what scripts/train.sh asks for, so it installs nothing after this
.venv/bin/ruff check rlpipe tests examples benchmarks scripts
.venv/bin/mypy rlpipe
# One pytest-xdist worker per core of a 2-core CI machine; a later -n N (or -n 0: none) overrides it.
.venv/bin/python -m pytest -n 2 --dist loadgroup ${select[@]+"${select[@]}"} "$@"
