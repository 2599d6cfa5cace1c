// bench/gates: the benchmarks at a reduced size, each ratio checked against
// a limit; exits 1 when one is over. CI runs it (.ci/run). See
// bench/README.md for the sizes, the limits and why the margins are what
// they are.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { median, releaseBinaries } from './common.mjs';

const here = dirname(fileURLToPath(import.meta.url));

const USAGE = `usage: bench/gates [--steps PATH] [--mock-provider PATH] [--repeat N]
  --steps PATH          the steps binary (default build-release/src/cli/steps, built when missing)
  --mock-provider PATH  (default build-release/mock_provider/mock_provider)
  --repeat N            runs of each benchmark (task steps: N + 2); the median counts (default 3)`;

// Each gate: what is measured, the target for it, and the limit CI
// holds it to. Where the target is met at this size, the limit is the
// target plus a margin; where it is not met yet, the limit is the figure
// measured on the reference machine plus a margin (`measured`), so that CI
// catches a regression while the target stays in view: both are printed.
//
// The margins absorb the noise of a shared 2-core machine. Four runs of
// bench/gates on the same binary, one after another (bench/README.md),
// gave medians that moved by: task steps 1.33-1.42 (7%), wide 1.23-1.27
// (3%), long CPU ratio 5.5-6.4 (16%), CPU ratio to openai-node
// 0.140-0.153 (9%), peak RSS 20.0-20.1 MB, fan-out 1.09-1.10. Hence 15% on
// wall-time ratios (a CI machine is busier than that one was), 25% on the
// CPU ratio to openai-node, 50% on the CPU ratio to the floor (the floor's
// own CPU is about 10 ms at this size, and single runs of it at 200
// requests measured 0.016-0.028 s within one run of bench/peers), 5% on
// memory.
//
// Task steps have 25% and two more runs than the rest (they are cheap, 1-2
// s each): every step makes a folder, and on ext4 without a journal
// making one is slower for up to five minutes after many were deleted
// (the allocator passes over inodes freed that recently), as after the
// benchmark's own earlier run or a build folder removed. Single runs on an
// idle machine measured 1.28-1.70 in one hour, and a median of three 1.59.
//
// The wide fan-out (2000) and the peers' fan-out (500) met their targets
// once, and not since: the last three passes in .ci/run gave 1.394, 1.407
// and 1.455, and 1.16, 1.17 and 1.15. Their limits rest on those figures
// (1.4 and 1.15) until the targets are met again.
const TASK_EXTRA_RUNS = 2;
const GATES = [
  {
    name: 'task steps ÷ shell loop (300 steps, state on disk)',
    key: 'task_steps_ratio', target: 1.0, measured: 1.4, margin: 0.25,
  },
  {
    name: 'wide fan-out 2000 × 3 requests, wall ÷ 3 s floor',
    key: 'wide_wall_over_floor', target: 1.3, measured: 1.4, margin: 0.15,
  },
  {
    name: 'wide fan-out 2000, failed conversations',
    key: 'wide_failed', target: 0, margin: 0, exact: true,
  },
  {
    name: 'long conversation (100 requests), steps CPU ÷ libcurl floor CPU',
    key: 'long_cpu_over_floor', target: 2.0, measured: 3.6, margin: 0.5,
  },
  {
    name: 'long conversation, steps CPU ÷ openai-node CPU',
    key: 'long_cpu_over_openai_node', target: 0.1, measured: 0.13, margin: 0.25,
  },
  {
    name: 'long conversation, steps peak RSS (MB)',
    key: 'long_rss_mb', target: 20, margin: 0.05,
  },
  {
    name: 'fan-out 500 × 3 requests, steps wall ÷ 3 s floor',
    key: 'fanout_wall_over_floor', target: 1.1, measured: 1.15, margin: 0.15,
  },
];

function parseArgs(argv) {
  const o = { repeat: 3 };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    }
    const name = arg.replace(/^--/, '');
    if (!['steps', 'mock-provider', 'repeat'].includes(name) || i + 1 >= argv.length) {
      fail(`unknown or incomplete option '${arg}'\n${USAGE}`, 64);
    }
    o[name] = argv[++i];
  }
  o.repeat = Number(o.repeat);
  if (!Number.isInteger(o.repeat) || o.repeat < 1) fail('--repeat wants a whole number >= 1', 64);
  return o;
}

function fail(message, code = 1) {
  console.error(`bench/gates: ${message}`);
  process.exit(code);
}

function log(message) {
  console.error(`bench/gates: ${message}`);
}

function binaries(o) {
  return releaseBinaries({ steps: o.steps, mock: o['mock-provider'] }, log,
    (message) => fail(message, 64));
}

// Runs `cmd args`, failing the gates with its output when it fails.
function run(cmd, args, label) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) {
    fail(`${label} failed (exit ${r.status ?? r.signal})\n--- stdout\n` +
      `${(r.stdout ?? '').slice(-3000)}\n--- stderr\n${(r.stderr ?? '').slice(-3000)}`);
  }
  return r.stdout;
}

function lastJson(text, label) {
  const lines = text.trim().split('\n').filter((l) => l.startsWith('{'));
  if (lines.length === 0) fail(`${label} printed no JSON line:\n${text}`);
  return JSON.parse(lines[lines.length - 1]);
}

function measure(o, bins) {
  const got = {};
  const task = [];
  const wall = [];
  let failed = 0;
  for (let i = 0; i < o.repeat + TASK_EXTRA_RUNS; ++i) {
    const out = run(join(here, 'pipeline/task_steps.sh'), [bins.steps, '300'], 'task_steps.sh');
    const m = out.match(/^ratio: ([0-9.]+)x/m);
    if (!m) fail(`task_steps.sh printed no ratio:\n${out}`);
    task.push(Number(m[1]));
    if (i >= o.repeat) continue;
    const wide = lastJson(run(join(here, 'agent/wide.sh'), [bins.steps, bins.mock, '2000'],
      'wide.sh 2000'), 'wide.sh');
    wall.push(wide.wall_over_floor);
    failed = Math.max(failed, wide.failed);
  }
  got.task_steps_ratio = median(task);
  got.wide_wall_over_floor = median(wall);
  got.wide_failed = failed;
  const work = mkdtempSync(join(tmpdir(), 'steps-gates-'));
  try {
    const json = join(work, 'peers.json');
    run(join(here, 'peers/run'), ['--turns', '100', '--width', '500', '--repeat', String(o.repeat),
      '--steps', bins.steps, '--mock-provider', bins.mock, '--json', json], 'bench/peers/run');
    const peers = JSON.parse(readFileSync(json, 'utf8'));
    got.long_cpu_over_floor = peers.long.ratios.steps_cpu_over_floor;
    got.long_cpu_over_openai_node = peers.long.ratios.steps_cpu_over_openai_node;
    got.long_rss_mb = peers.long.steps.max_rss_mb;
    got.fanout_wall_over_floor = peers.fanout.ratios.steps_wall_over_scripted_floor;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return got;
}

function main() {
  const o = parseArgs(process.argv.slice(2));
  const bins = binaries(o);
  const load = loadavg().map((x) => x.toFixed(2)).join(' ');
  log(`${o.repeat} runs each; ${cpus().length} cores, load ${load}`);
  const got = measure(o, bins);
  let over = 0;
  const rows = [];
  for (const g of GATES) {
    const value = got[g.key];
    const base = g.measured ?? g.target;
    const limit = g.exact ? g.target : base * (1 + g.margin);
    const ok = g.exact ? value === limit : value <= limit;
    if (!ok) ++over;
    const held = g.measured === undefined ? 'target' : `measured ${g.measured} (target not met yet)`;
    rows.push(`${ok ? 'ok  ' : 'OVER'}  ${g.name}: ${Number(value.toFixed(3))}` +
      ` (limit ${Number(limit.toFixed(3))}: ${held}; target ${g.target})`);
  }
  console.log(rows.join('\n'));
  console.log(JSON.stringify({ bench: 'gates', repeat: o.repeat, measured: got, over }));
  if (over > 0) fail(`${over} of ${GATES.length} gates over their limit`);
}

main();
