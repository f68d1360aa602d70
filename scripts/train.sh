#!/usr/bin/env bash
# Set up .venv and train: scripts/train.sh [PRESET|CONFIG.yaml] [key=value ...] (default: cartpole-dqn).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh plot
if [ $# -eq 0 ]; then set -- cartpole-dqn; fi
exec .venv/bin/rlpipe train "$@"
