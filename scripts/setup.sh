#!/usr/bin/env bash
# Create .venv and install rlpipe into it. PyTorch is pinned to the CPU wheel first so that
# the project's torch>=... range is already met and no CUDA build is pulled.
# Usage: scripts/setup.sh [extra,...]   e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
if [ -n "$extras" ]; then
  .venv/bin/python -m pip install --quiet -e ".[$extras]"
else
  .venv/bin/python -m pip install --quiet -e .
fi
