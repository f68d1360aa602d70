#!/usr/bin/env bash
# Create .venv and install rlpipe into it. PyTorch is pinned to the CPU wheel first so that
# the project's torch>=... range is already met and no CUDA build is pulled.
# rlpipe is installed editable, so code changes need no reinstall: when pyproject.toml and the
# extras asked for are the same as at the last successful setup, the install is skipped.
# Usage: scripts/setup.sh [extra,...]   e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
torch_pin="torch==2.13.0"
stamp=".venv/.rlpipe-setup"
wanted="$(sha256sum pyproject.toml | cut -d' ' -f1) extras=[${extras}] ${torch_pin}"
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  echo "setup: .venv is up to date (same pyproject.toml, extras [${extras}]); nothing to install"
  exit 0
fi
echo "setup: creating .venv and installing ${torch_pin} (CPU), then rlpipe${extras:+[${extras}]} (editable)"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "$torch_pin"
if [ -n "$extras" ]; then
  .venv/bin/python -m pip install --quiet -e ".[$extras]"
else
  .venv/bin/python -m pip install --quiet -e .
fi
echo "$wanted" > "$stamp"
echo "setup: done"
