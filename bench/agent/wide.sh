#!/usr/bin/env bash
# A wide fan-out over loopback HTTP: `steps run` with an across of WIDTH
# agent cells, all in flight together, against `mock_provider` in its own
# process (--by-conversation: each cell's conversation goes through the
# script from its first entry). Each conversation makes 3 requests (two
# read_file calls, then an answer), every answer 1 s late: the scripted
# floor is 3 s. Prints wall, CPU and peak memory of `steps`, the mock's CPU
# and the most requests it held at once, the failures, and a JSON line.
#   bench/agent/wide.sh [STEPS] [MOCK_PROVIDER] [WIDTH]   (default 10000)
# Both sides need WIDTH descriptors and more: each raises its soft limit to
# the hard one (`ulimit -Hn`). The state folder goes under $TMPDIR, which
# should be a disk, not tmpfs.
set -euo pipefail
steps=${1:-build/src/cli/steps}
mock=${2:-build/mock_provider/mock_provider}
width=${3:-10000}
for bin in "$steps" "$mock"; do
  [ -x "$bin" ] || { echo "wide.sh: no executable at $bin (build first)" >&2; exit 64; }
done
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt $((width + 256)) ]; then
  echo "wide.sh: $width conversations need more than the hard descriptor limit $hard" >&2
  exit 64
fi
work=$(mktemp -d)
mock_pid=
cleanup() {
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for i in 0 1; do head -c 512 /dev/zero | tr '\0' "$i" > "$work/f$i.txt"; done
cat > "$work/script.yaml" <<'EOF'
fan:
  - delay: 1s
    call: {name: read_file, arguments: {path: f0.txt}}
  - delay: 1s
    call: {name: read_file, arguments: {path: f1.txt}}
  - delay: 1s
    say: done
EOF

"$mock" --script "$work/script.yaml" --by-conversation > "$work/mock.out" 2>&1 &
mock_pid=$!
for _ in $(seq 200); do
  grep -q listening "$work/mock.out" && break
  kill -0 "$mock_pid" 2>/dev/null || { cat "$work/mock.out" >&2; exit 1; }
  sleep 0.05
done
url=$(sed -n 's/^listening on //p' "$work/mock.out")
[ -n "$url" ] || { echo "wide.sh: the mock did not start" >&2; exit 1; }

{
  echo "agents:"
  echo "- name: fan"
  echo "  source: {model: openai/fanout, base_url: \"$url/v1\"}"
  echo "  tools: [read_file]"
  echo "  timeout: \"0\""
  echo "  max_turns: 0"
  echo "jobs:"
  echo "- name: wide"
  echo "  plan:"
  echo "  - task: files"
  echo "    run: cp '$work'/f*.txt \"\$STEPS_ARTIFACTS\"/"
  printf '  - across: [{var: i, max_in_flight: %d, values: [' "$width"
  seq -s, 1 "$width" | tr -d '\n'
  echo ']}]'
  echo "    do:"
  echo "    - agent: fan"
  echo "      messages: [\"conversation {{ .i }}\"]"
} > "$work/wide.yaml"

timer=()
if [ -x /usr/bin/time ]; then timer=(/usr/bin/time -f '%e %U %S %M' -o "$work/usage"); fi
start=$(date +%s.%N)
set +e
"${timer[@]}" "$steps" run --plain --no-cache --state-dir "$work/state" "$work/wide.yaml" \
  > "$work/run.out" 2>&1
rc=$?
set -e
end=$(date +%s.%N)
succeeded=$(grep -c '^agent: fan .* succeeded' "$work/run.out" || true)
failed=$((width - succeeded))
read -r mock_utime mock_stime < <(awk '{print $14, $15}' "/proc/$mock_pid/stat")
ticks=$(getconf CLK_TCK)
hostport=${url#http://}
stats=$( { exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}" &&
  printf 'GET /_stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3 &&
  cat <&3; } 2>/dev/null || echo '{}')
max_held=$(sed -n 's/.*"max_held":\([0-9]*\).*/\1/p' <<<"$stats")
if [ -f "$work/usage" ]; then
  read -r _ user sys rss_kb < "$work/usage"
else
  user=nan sys=nan rss_kb=0
fi
awk -v a="$start" -v b="$end" -v u="$user" -v s="$sys" -v r="$rss_kb" \
    -v w="$width" -v f="$failed" -v rc="$rc" -v mu="$mock_utime" -v ms="$mock_stime" \
    -v t="$ticks" -v h="${max_held:-0}" -v n="$(nproc)" 'BEGIN {
  wall = b - a; cpu = u + s; mock = (mu + ms) / t;
  printf "wide fan-out: %d conversations x 3 requests, answers 1 s late (floor 3 s), %d cores\n", w, n;
  printf "steps: wall %.2f s (%.2fx the floor), cpu %.2f s (%.2f ms per conversation), peak %.0f MB, exit %d\n",
         wall, wall / 3, cpu, 1000 * cpu / w, r / 1024, rc;
  printf "mock_provider: cpu %.2f s, held %d requests at once\n", mock, h;
  printf "failed conversations: %d\n", f;
  printf "{\"bench\":\"wide\",\"width\":%d,\"wall_s\":%.3f,\"wall_over_floor\":%.3f,\"cpu_s\":%.3f,\"max_rss_mb\":%.1f,\"mock_cpu_s\":%.3f,\"max_held\":%d,\"failed\":%d,\"exit\":%d}\n",
         w, wall, wall / 3, cpu, r / 1024, mock, h, f, rc;
}'
if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ]; then
  tail -5 "$work/run.out" >&2
  exit 1
fi
