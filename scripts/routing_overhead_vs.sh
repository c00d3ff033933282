#!/usr/bin/env bash
# Routing overhead of this tree against an older commit, side by side on this machine (bench/routing_alone.py).
# Usage: scripts/routing_overhead_vs.sh REF [ROUNDS]   e.g. scripts/routing_overhead_vs.sh ac1fa16^ 2
# Both trees use this checkout's .venv, models and shared data; the torch encoder, which every tree has.
set -euo pipefail
ref=${1:?usage: $0 REF [ROUNDS]}; rounds=${2:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(mktemp -d)/tree
trap 'git -C "$here" worktree remove --force "$old" >/dev/null 2>&1 || true' EXIT
git -C "$here" worktree add --detach "$old" "$ref" >/dev/null
export HF_HUB_OFFLINE=1 TANDEM_MODEL_DIR="${TANDEM_MODEL_DIR:-$here/.tandem/models}"
export TANDEM_DATA_DIR="${TANDEM_DATA_DIR:-$(realpath "$here/../shared/data")}"
for round in $(seq "$rounds"); do
  for tree in "$old" "$here"; do
    name=$([ "$tree" = "$here" ] && echo now || echo "$ref")
    line=$(cd "$tree" && PYTHONPATH="$tree" "$here/.venv/bin/python" "$here/bench/routing_alone.py" 2>/dev/null | tail -1)
    echo "round $round  $name  $line"
  done
done
