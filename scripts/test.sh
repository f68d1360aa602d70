#!/usr/bin/env bash
# Set up .venv (with the test extra) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/python -m pytest "$@"
