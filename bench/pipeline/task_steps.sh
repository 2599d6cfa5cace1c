#!/usr/bin/env bash
# 1000 trivial task steps through `steps run`, against the same 1000 commands
# through a shell loop (each in its own bash, as steps runs them). Prints both
# times and the ratio; the target is at most 1.0x the loop, state on a disk.
#   bench/pipeline/task_steps.sh [STEPS_BINARY] [N]
set -euo pipefail
steps=${1:-build/src/cli/steps}
n=${2:-1000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

{
  echo "jobs:"
  echo "- name: many"
  echo "  plan:"
  for i in $(seq "$n"); do
    echo "  - task: step-$i"
    echo "    run: echo step $i"
  done
} > "$work/many.yaml"

now() { date +%s.%N; }

start=$(now)
"$steps" run --plain --state-dir "$work/state" "$work/many.yaml" > /dev/null
mid=$(now)
for i in $(seq "$n"); do bash -c "echo step $i" > /dev/null; done
end=$(now)

awk -v a="$start" -v b="$mid" -v c="$end" -v n="$n" 'BEGIN {
  s = b - a; l = c - b;
  printf "steps run: %d task steps in %.2fs (%.2f ms/step)\n", n, s, 1000 * s / n;
  printf "shell loop: %d commands in %.2fs (%.2f ms/command)\n", n, l, 1000 * l / n;
  printf "ratio: %.2fx (target: at most 1.0x)\n", s / l;
}'
