#!/usr/bin/env bash
# N trivial task steps through Slurm (`--runner slurm`, each step one batch
# job) against the same steps run locally, one after another and as an
# across of N cells 8 at a time. Prints each time and the cost per step that
# Slurm adds. Needs a cluster (scripts/slurm-up starts a one-node one).
#   bench/pipeline/slurm_steps.sh [STEPS_BINARY] [N]
set -euo pipefail
steps=${1:-build/src/cli/steps}
n=${2:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

values=$(seq -s, "$n")
{
  echo "jobs:"
  echo "- name: chain"
  echo "  plan:"
  for i in $(seq "$n"); do
    echo "  - task: step-$i"
    echo "    run: echo step $i"
  done
  echo "- name: fan"
  echo "  plan:"
  echo "  - across:"
  echo "    - var: i"
  echo "      values: [$values]"
  echo "      max_in_flight: 8"
  echo "    do:"
  echo "    - task: cell"
  echo "      run: echo cell"
} > "$work/many.yaml"

now() { date +%s.%N; }
# Seconds one job of the file takes with the given runner.
timed() {
  local runner=$1 job=$2 start end
  start=$(now)
  if ! "$steps" run --plain --no-cache --state-dir "$work/state-$runner-$job" \
    --runner "$runner" --job "$job" "$work/many.yaml" > "$work/out" 2>&1; then
    cat "$work/out" >&2
    exit 1
  fi
  end=$(now)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}

chain_local=$(timed local chain)
chain_slurm=$(timed slurm chain)
fan_local=$(timed local fan)
fan_slurm=$(timed slurm fan)
awk -v n="$n" -v cl="$chain_local" -v cs="$chain_slurm" \
    -v fl="$fan_local" -v fs="$fan_slurm" 'BEGIN {
  printf "one after another: %d steps locally %.2fs, on Slurm %.2fs: +%.0f ms per step\n", n, cl, cs, 1000 * (cs - cl) / n;
  printf "across, 8 at a time: %d cells locally %.2fs, on Slurm %.2fs: +%.0f ms per cell\n", n, fl, fs, 1000 * (fs - fl) / n;
}'
