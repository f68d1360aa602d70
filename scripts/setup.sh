#!/usr/bin/env bash
# Create .venv and install rlpipe into it. PyTorch is pinned first so that the project's
# torch>=... range is already met: the CPU build by default (torch==X+cpu from PyTorch's CPU index,
# https://download.pytorch.org/whl/cpu, after a wheel already on this machine through pip's
# find-links, torch alone: its dependencies come with rlpipe's; plain PyPI would bring the
# multi-GB CUDA build), or with the word `cuda` among the
# arguments a CUDA build from PyTorch's wheel index for the CUDA version in RLPIPE_CUDA
# (default cu128: the index https://download.pytorch.org/whl/cu128; your driver must support it).
# rlpipe is installed editable, so code changes need no reinstall: when pyproject.toml and the
# torch build are the same as at the last successful setup and it installed the extras asked for
# already, the install is skipped. RLPIPE_SETUP_DRY_RUN=1 prints the commands instead of running them.
# Usage: scripts/setup.sh [cuda,][extra,...]   e.g. scripts/setup.sh test   or   scripts/setup.sh cuda,mujoco
set -euo pipefail
cd "$(dirname "$0")/.."
dry_run="${RLPIPE_SETUP_DRY_RUN:-}"
torch_version="2.13.0"
extras=""
build="cpu"
words="${1:-}"
for word in ${words//,/ }; do
  if [ "$word" = "cuda" ]; then
    build="${RLPIPE_CUDA:-cu128}"
  elif [ -n "$word" ]; then
    extras="${extras:+${extras},}${word}"
  fi
done
if [ "$build" = "cpu" ]; then
  torch_args=("torch==${torch_version}+cpu" --extra-index-url "https://download.pytorch.org/whl/cpu")
else
  torch_args=("torch==${torch_version}+${build}" --index-url "https://download.pytorch.org/whl/${build}")
fi

run() {
  if [ -n "$dry_run" ]; then echo "+ $*"; else "$@"; fi
}

# The stamp holds what the last successful setup installed: line 1 the pyproject.toml digest and the
# torch build, line 2 its extras. Extras only grow: those installed before stay in every later
# install, so `scripts/train.sh` after `scripts/test.sh` (whose extras include train.sh's) installs nothing.
stamp=".venv/.rlpipe-setup"
base="$(sha256sum pyproject.toml | cut -d' ' -f1) ${torch_args[*]}"
previous=""
if [ -z "$dry_run" ] && [ -f "$stamp" ]; then previous="$(sed -n 2p "$stamp")"; fi
extras="$(printf '%s\n' ${previous//,/ } ${extras//,/ } | sort -u | paste -sd, -)"
if [ -z "$dry_run" ] && [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(sed -n 1p "$stamp")" = "$base" ] \
    && [ "$previous" = "$extras" ]; then
  echo "setup: .venv is up to date (same pyproject.toml and torch ${build}, extras [${extras}]); nothing to install"
  exit 0
fi
echo "setup: installing torch ${torch_version} (${build}), then rlpipe${extras:+[${extras}]} (editable) into .venv"
if [ ! -x .venv/bin/python ]; then
  run python3 -m venv .venv
fi
run .venv/bin/python -m pip install --quiet --upgrade pip
if [ "$build" = "cpu" ] && [ -z "$dry_run" ] \
    && .venv/bin/python -m pip install --quiet --no-index --no-deps "torch==${torch_version}+cpu" 2>/dev/null; then
  echo "setup: torch ${torch_version}+cpu from a wheel on this machine"
else
  run .venv/bin/python -m pip install --quiet "${torch_args[@]}"
fi
if [ -n "$extras" ]; then
  run .venv/bin/python -m pip install --quiet -e ".[$extras]"
else
  run .venv/bin/python -m pip install --quiet -e .
fi
if [ -z "$dry_run" ]; then
  printf '%s\n%s\n' "$base" "$extras" > "$stamp"
fi
echo "setup: done"
