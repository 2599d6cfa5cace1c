// bench/peers/run: steps, openai-node and a bare libcurl client run the same
// conversations against one mock, alternating, each in its own process.
// See bench/peers/README.md for what is measured and how.
import { execFileSync, spawn } from 'node:child_process';
import {
  existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync,
} from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { median, releaseBinaries } from '../common.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const FANOUT_TURNS = 3;
const FANOUT_DELAY_MS = 1000;

const USAGE = `usage: bench/peers/run [--turns N] [--width N] [--repeat N] [--only long|fanout]
                      [--steps PATH] [--mock-provider PATH] [--work DIR] [--json FILE]
  --turns N     requests in the long conversation (default 200: 199 tool turns, an answer)
  --width N     conversations in flight together in the fan-out (default 1000)
  --repeat N    runs of each contender per scenario, alternating (default 5)
  --only S      run one scenario
  --steps PATH  the steps binary (default build-release/src/cli/steps, built when missing)
  --mock-provider PATH  (default build-release/mock_provider/mock_provider)
  --work DIR    scratch folder (default a new one under $TMPDIR)
  --json FILE   also write the summary line to FILE`;

function parseArgs(argv) {
  const o = { turns: 200, width: 1000, repeat: 5, only: null };
  const numeric = new Set(['turns', 'width', 'repeat']);
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    }
    const name = arg.replace(/^--/, '');
    const known = ['turns', 'width', 'repeat', 'only', 'steps', 'mock-provider',
      'work', 'json'];
    if (!arg.startsWith('--') || !known.includes(name) || i + 1 >= argv.length) {
      fail(`unknown or incomplete option '${arg}'\n${USAGE}`, 64);
    }
    const value = argv[++i];
    if (numeric.has(name)) {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1) fail(`--${name} wants a whole number >= 1, got '${value}'`, 64);
      o[name] = n;
    } else {
      o[name] = value;
    }
  }
  if (o.turns < 2) fail('--turns wants at least 2 (one tool turn and the answer)', 64);
  if (o.only && !['long', 'fanout'].includes(o.only)) fail(`--only takes long or fanout, not '${o.only}'`, 64);
  return o;
}

function fail(message, code = 1) {
  console.error(`bench/peers: ${message}`);
  process.exit(code);
}

function log(message) {
  console.error(`bench/peers: ${message}`);
}

// --- Setup -----------------------------------------------------------------

function binaries(o) {
  return releaseBinaries({ steps: o.steps, mock: o['mock-provider'] }, log, fail);
}

function installOpenAi() {
  if (existsSync(join(here, 'node_modules/openai/package.json'))) return;
  log('installing the pinned openai package (npm ci)');
  execFileSync('npm', ['ci', '--engine-strict', '--no-audit', '--no-fund', '--prefix', here],
    { stdio: ['ignore', 'ignore', 'inherit'] });
}

function compile(work) {
  const out = {};
  for (const [name, src, libs] of [['bench_peers_floor', 'floor.c', ['-lcurl']],
    ['bench_peers_measure', 'measure.c', []]]) {
    out[name] = join(work, name);
    execFileSync(process.env.CC || 'cc',
      ['-O2', '-Wall', '-Wextra', '-o', out[name], join(here, src), ...libs],
      { stdio: ['ignore', 'inherit', 'inherit'] });
  }
  return out;
}

// Ten 512-byte files, f0.txt .. f9.txt, that the tool calls read.
function fileText(i) {
  return String.fromCharCode(97 + i).repeat(511) + '\n';
}

function writeFiles(dir) {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < 10; ++i) writeFileSync(join(dir, `f${i}.txt`), fileText(i));
}

function machine() {
  const cpu = cpus()[0]?.model ?? 'unknown';
  return { nproc: cpus().length, cpu, load: loadavg().map((l) => Number(l.toFixed(2))) };
}

function filesystem(dir) {
  try {
    return execFileSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

// --- Processes -------------------------------------------------------------

// Runs `cmd` under the measure helper; resolves to its usage, output and
// exit status.
function measured(tools, label, cmd, args) {
  const name = label.replace(/\W+/g, '-').replace(/-$/, '');
  const out = join(tools.work, `usage-${name}.json`);
  return new Promise((resolveRun) => {
    const child = spawn(tools.bench_peers_measure, [out, cmd, ...args],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('close', (code) => {
      writeFileSync(join(tools.work, `output-${name}.txt`),
        `--- stdout\n${stdout}--- stderr\n${stderr}`);
      let usage = null;
      try {
        usage = JSON.parse(readFileSync(out, 'utf8'));
      } catch {
        // No usage: the helper itself failed; reported below.
      }
      resolveRun({ code, usage, stdout, stderr });
    });
  });
}

// Servers still running; stopped however this process exits.
const servers = new Set();
process.on('exit', () => {
  for (const child of servers) child.kill('SIGTERM');
});

// Starts a server that prints "listening on http://HOST:PORT".
function startServer(cmd, args, logFile) {
  return new Promise((resolveStart, rejectStart) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    servers.add(child);
    let seen = '';
    let errors = '';
    child.stderr.on('data', (d) => { errors += d; });
    child.stdout.on('data', (d) => {
      seen += d;
      const m = seen.match(/listening on (http:\/\/\S+)/);
      if (m) resolveStart({ child, url: m[1] });
    });
    child.on('exit', (code) => {
      writeFileSync(logFile, errors);
      rejectStart(new Error(`${cmd} exited (${code}) before listening: ${errors.trim()}`));
    });
  });
}

function stopServer(server) {
  server.child.removeAllListeners('exit');
  server.child.kill('SIGTERM');
  servers.delete(server.child);
}

async function getJson(url, init) {
  const res = await fetch(url, init);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return res.json();
}

// A contender's run: its usage when it exited 0 and `check` passed, else
// the run is reported and the whole bench fails (a failing contender must
// not look fast).
async function contender(tools, label, cmd, args, check, mock) {
  const mockBefore = processCpu(mock.child.pid);
  const run = await measured(tools, label, cmd, args);
  const mockCpu = processCpu(mock.child.pid) - mockBefore;
  const problem = run.code !== 0 || !run.usage
    ? `exit ${run.code}` : await check(run);
  if (problem) {
    fail(`${label} failed: ${problem} (its files are in ${tools.work})\n--- stdout\n${run.stdout.slice(-2000)}` +
      `\n--- stderr\n${run.stderr.slice(-2000)}`);
  }
  log(`${label}: wall ${run.usage.wall_s.toFixed(3)} s, CPU ${run.usage.cpu_s.toFixed(3)} s, ` +
    `peak RSS ${(run.usage.max_rss_kib / 1024).toFixed(1)} MB (the mock: CPU ${mockCpu.toFixed(2)} s)`);
  return { ...run.usage, mock_cpu_s: mockCpu };
}

// User + system CPU seconds a running process has used so far.
const TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
function processCpu(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS;
  } catch {
    return NaN;
  }
}

// --- Pipelines and scripts -------------------------------------------------

function agentEntry(name, model, baseUrl) {
  return `- name: ${name}
  source: {model: openai/${model}, base_url: "${baseUrl}"}
  tools: [read_file]
  timeout: "0"
  max_turns: 0
`;
}

function copyFilesTask(filesDir) {
  return `  - task: files
    run: cp '${filesDir}'/f*.txt "$STEPS_ARTIFACTS"/
`;
}

function longPipeline(key, baseUrl, filesDir) {
  return `agents:
${agentEntry(key, 'bench', baseUrl)}
jobs:
- name: long
  plan:
${copyFilesTask(filesDir)}  - agent: ${key}
    messages: ["Read the files."]
`;
}

// The same run without its conversation: what steps costs before any
// request (start, the store, the files task).
function startupPipeline(filesDir) {
  return `jobs:
- name: long
  plan:
${copyFilesTask(filesDir)}`;
}

function fanoutPipeline(width, baseUrl, filesDir) {
  const values = Array.from({ length: width }, (_, i) => `"${i + 1}"`).join(', ');
  return `agents:
${agentEntry('fan', 'fanout', baseUrl)}
jobs:
- name: fanout
  plan:
${copyFilesTask(filesDir)}  - across: [{var: i, values: [${values}], max_in_flight: ${width}}]
    do:
    - agent: fan
      messages: ["conversation {{ .i }}"]
`;
}

// One script per key: turns - 1 read_file calls (ids fixed, so every
// contender sends the same bytes), then "done". Each entry expects the
// conversation's length and, after the first, the file the call before
// read, so a contender that sends a wrong conversation fails the run.
function longScript(keys, turns) {
  let yaml = '';
  for (const key of keys) {
    yaml += `${key}:\n`;
    for (let i = 0; i < turns; ++i) {
      const expect = [`messages: ${1 + 2 * i}`];
      if (i > 0) expect.push(`last_is: ${JSON.stringify(fileText((i - 1) % 10))}`);
      yaml += i + 1 < turns
        ? `  - call: {name: read_file, arguments: {path: f${i % 10}.txt}, id: call_${i}}\n`
        : '  - say: done\n';
      yaml += `    expect: {${expect.join(', ')}}\n`;
    }
  }
  return yaml;
}

// --- Scenarios -------------------------------------------------------------

async function runSteps(tools, label, pipeline) {
  const dir = join(tools.work, label);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'pipeline.yaml');
  writeFileSync(file, pipeline);
  return [tools.steps, ['run', file, '--state-dir', join(dir, 'state'), '--no-cache']];
}

async function long(o, tools) {
  const keys = ['capture'];
  for (let r = 1; r <= o.repeat; ++r) keys.push(`s${r}`, `n${r}`, `f${r}`);
  const scriptFile = join(tools.work, 'long.mock.yaml');
  writeFileSync(scriptFile, longScript(keys, o.turns));
  const mock = await startServer(tools.mock, ['--script', scriptFile],
    join(tools.work, 'mock_provider.log'));
  const base = `${mock.url}/v1`;
  try {
    let failures = 0;
    const noNewFailures = async () => {
      const now = await getJson(`${mock.url}/_failures`);
      const fresh = now.slice(failures);
      failures = now.length;
      return fresh.length ? `the mock's expectations failed: ${fresh.slice(0, 3).join('; ')}` : null;
    };

    // One steps run, not measured, whose requests the floor replays.
    const [cmd, args] = await runSteps(tools, 'long-capture',
      longPipeline('capture', base, tools.files));
    await contender(tools, 'long capture (steps, not counted)', cmd, args, noNewFailures, mock);
    const requests = (await getJson(`${mock.url}/_requests`)).filter((r) => r.agent === 'capture');
    if (requests.length !== o.turns) fail(`the capture sent ${requests.length} requests, not ${o.turns}`);
    const bodies = join(tools.work, 'long.bodies');
    // The mock hands bodies back parsed; written compactly again they are
    // the same JSON (keys in sorted order) and, all text here being ASCII,
    // the same length.
    const texts = requests.map((r) => (typeof r.body === 'string' ? r.body : JSON.stringify(r.body)));
    writeFileSync(bodies, Buffer.concat(texts.map((t) => {
      const b = Buffer.from(t);
      return Buffer.concat([Buffer.from(`${b.length}\n`), b]);
    })));
    const toolsFile = join(tools.work, 'tools.json');
    writeFileSync(toolsFile, JSON.stringify(JSON.parse(texts[0]).tools));
    const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);

    const runs = { steps: [], openai_node: [], floor: [], steps_startup: [], openai_node_startup: [] };
    for (let r = 1; r <= o.repeat; ++r) {
      const [bc, ba] = await runSteps(tools, `startup-s${r}`, startupPipeline(tools.files));
      runs.steps_startup.push(await contender(tools, `startup steps #${r}`, bc, ba, noNewFailures, mock));
      runs.openai_node_startup.push(await contender(tools, `startup openai-node #${r}`, 'node',
        [join(here, 'openai_node.mjs'), 'startup', '--base-url', base],
        async (run) => (!run.stdout.includes('"ok":true') ? 'no ok line' : null), mock));
      const [sc, sa] = await runSteps(tools, `long-s${r}`, longPipeline(`s${r}`, base, tools.files));
      runs.steps.push(await contender(tools, `long steps #${r}`, sc, sa, noNewFailures, mock));
      runs.openai_node.push(await contender(tools, `long openai-node #${r}`, 'node',
        [join(here, 'openai_node.mjs'), 'long', '--base-url', base, '--model', `n${r}`,
          '--dir', tools.files, '--tools', toolsFile, '--turns', String(o.turns)],
        async (run) => (!run.stdout.includes('"ok":true') ? 'no ok line' : noNewFailures()), mock));
      runs.floor.push(await contender(tools, `long floor #${r}`, tools.bench_peers_floor,
        [`${base}/chat/completions`, bodies, `f${r}`],
        async (run) => (!run.stdout.includes(`"requests":${o.turns},"answer_ok":true`)
          ? 'wrong request count or answer' : noNewFailures()), mock));
    }
    return { runs, request_bytes: bytes };
  } finally {
    stopServer(mock);
  }
}

async function fanout(o, tools) {
  const mock = await startServer('node', [join(here, 'fanout_mock.mjs'),
    '--turns', String(FANOUT_TURNS), '--delay-ms', String(FANOUT_DELAY_MS)],
  join(tools.work, 'fanout_mock.log'));
  const base = `${mock.url}/v1`;
  try {
    const toolsFile = join(tools.work, 'tools.json');
    if (!existsSync(toolsFile)) {
      writeFileSync(toolsFile, JSON.stringify([{ type: 'function', function: {
        name: 'read_file', description: 'Read a text file.',
        parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      } }]));
    }
    // Every conversation took exactly its turns; then the counts start over.
    let inFlight = 0;
    let spreads = [];
    const served = async () => {
      const s = await getJson(`${mock.url}/_stats`);
      await fetch(`${mock.url}/_reset`, { method: 'POST' });
      inFlight = s.max_in_flight;
      spreads = (s.rounds ?? []).map((r) => r.last_ms - r.first_ms);
      const want = o.width * FANOUT_TURNS;
      if (s.requests !== want || s.conversations !== o.width || s.bad !== 0) {
        return `the mock served ${s.requests} requests (want ${want}) in ${s.conversations} ` +
          `conversations (want ${o.width}), ${s.bad} of them wrong`;
      }
      return null;
    };
    const runs = { steps: [], openai_node: [] };
    for (let r = 1; r <= o.repeat; ++r) {
      const [sc, sa] = await runSteps(tools, `fanout-s${r}`, fanoutPipeline(o.width, base, tools.files));
      runs.steps.push({ ...await contender(tools, `fanout steps #${r}`, sc, sa, served, mock),
        max_in_flight: inFlight, spreads });
      runs.openai_node.push(await contender(tools, `fanout openai-node #${r}`, 'node',
        [join(here, 'openai_node.mjs'), 'fanout', '--base-url', base, '--dir', tools.files,
          '--tools', toolsFile, '--width', String(o.width), '--turns', String(FANOUT_TURNS)],
        async (run) => (!run.stdout.includes('"ok":true') ? 'no ok line' : served()), mock));
      runs.openai_node.at(-1).max_in_flight = inFlight;
      runs.openai_node.at(-1).spreads = spreads;
    }
    return { runs };
  } finally {
    stopServer(mock);
  }
}

// --- Report ----------------------------------------------------------------

function medians(runs) {
  const out = {};
  for (const [name, list] of Object.entries(runs)) {
    out[name] = {
      wall_s: round(median(list.map((u) => u.wall_s))),
      cpu_s: round(median(list.map((u) => u.cpu_s))),
      max_rss_mb: round(median(list.map((u) => u.max_rss_kib)) / 1024, 1),
      mock_cpu_s: round(median(list.map((u) => u.mock_cpu_s)), 2),
    };
    if (list[0].max_in_flight !== undefined) {
      out[name].max_in_flight = Math.min(...list.map((u) => u.max_in_flight));
    }
    if (list[0].spreads !== undefined) {
      const n = Math.min(...list.map((u) => u.spreads.length));
      out[name].round_spread_ms = Array.from({ length: n },
        (_, k) => Math.round(median(list.map((u) => u.spreads[k]))));
    }
  }
  return out;
}

function round(x, digits = 3) {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

function table(title, m) {
  const rows = [`${title}`, '  contender              wall s    CPU s   peak RSS MB   (mock CPU s)'];
  for (const [name, v] of Object.entries(m)) {
    rows.push(`  ${name.padEnd(20)} ${v.wall_s.toFixed(3).padStart(8)} ${v.cpu_s.toFixed(3).padStart(8)}` +
      ` ${v.max_rss_mb.toFixed(1).padStart(11)}   ${v.mock_cpu_s.toFixed(2).padStart(12)}`);
  }
  return rows.join('\n');
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const start = machine();
  const bins = binaries(o);
  installOpenAi();
  const work = o.work ? resolve(o.work) : mkdtempSync(join(tmpdir(), 'steps-peers-'));
  // The folder is written into the pipelines (a task's script, quoted).
  if (!/^[\w./-]+$/.test(work)) fail(`--work: '${work}' may hold only letters, digits, _ . / and -`, 64);
  mkdirSync(work, { recursive: true });
  const fs = filesystem(work);
  if (fs === 'tmpfs') log(`warning: ${work} is on tmpfs; steps' state folder belongs on a disk (--work DIR)`);
  const tools = { ...bins, ...compile(work), work, files: join(work, 'files') };
  writeFiles(tools.files);
  log(`work folder ${work} (${fs}); steps ${bins.steps}`);

  const summary = { bench: 'peers', turns: o.turns, width: o.width, repeat: o.repeat };
  const lines = [];
  if (o.only !== 'fanout') {
    const { runs, request_bytes: bytes } = await long(o, tools);
    const m = medians(runs);
    const ratios = {
      steps_cpu_over_floor: round(m.steps.cpu_s / m.floor.cpu_s, 2),
      steps_cpu_over_openai_node: round(m.steps.cpu_s / m.openai_node.cpu_s, 3),
      openai_node_cpu_over_floor: round(m.openai_node.cpu_s / m.floor.cpu_s, 2),
      steps_conversation_cpu_over_floor:
        round((m.steps.cpu_s - m.steps_startup.cpu_s) / m.floor.cpu_s, 2),
    };
    summary.long = { ...m, ratios, request_mb: round(bytes / 1e6, 1) };
    lines.push(table(`long: one ${o.turns}-request tool conversation (${round(bytes / 1e6, 1)} MB of requests), ` +
      `median of ${o.repeat}`, m));
    lines.push(`  steps CPU / floor CPU          ${ratios.steps_cpu_over_floor.toFixed(2)}  (target <= 2)`);
    lines.push(`  steps CPU / openai-node CPU    ${ratios.steps_cpu_over_openai_node.toFixed(3)} (target <= 0.1)`);
    lines.push(`  openai-node CPU / floor CPU    ${ratios.openai_node_cpu_over_floor.toFixed(2)}`);
    lines.push(`  (steps CPU - its startup) / floor CPU  ${ratios.steps_conversation_cpu_over_floor.toFixed(2)}`);
    lines.push(`  steps peak RSS                 ${m.steps.max_rss_mb.toFixed(1)} MB (target <= 20)`);
  }
  if (o.only !== 'long') {
    const { runs } = await fanout(o, tools);
    const m = medians(runs);
    const floor = FANOUT_TURNS * FANOUT_DELAY_MS / 1000;
    const ratios = {
      steps_wall_over_scripted_floor: round(m.steps.wall_s / floor, 2),
      openai_node_wall_over_scripted_floor: round(m.openai_node.wall_s / floor, 2),
      steps_cpu_over_openai_node: round(m.steps.cpu_s / m.openai_node.cpu_s, 3),
    };
    summary.fanout = { ...m, ratios, scripted_floor_s: floor };
    lines.push(table(`fanout: ${o.width} concurrent ${FANOUT_TURNS}-request conversations, answers ` +
      `${FANOUT_DELAY_MS} ms late (scripted floor ${floor} s), median of ${o.repeat}`, m));
    lines.push(`  steps wall / ${floor} s floor        ${ratios.steps_wall_over_scripted_floor.toFixed(2)}  (target <= 1.1)`);
    lines.push(`  openai-node wall / ${floor} s floor  ${ratios.openai_node_wall_over_scripted_floor.toFixed(2)}`);
    lines.push(`  steps CPU / openai-node CPU    ${ratios.steps_cpu_over_openai_node.toFixed(3)}`);
    lines.push(`  requests the mock held at once (fewest over the runs): steps ${m.steps.max_in_flight}, ` +
      `openai-node ${m.openai_node.max_in_flight} of ${o.width}`);
    // From the first request of a round to its last, as the mock saw them:
    // how long a contender took to send that round to every conversation.
    lines.push(`  ms from the first to the last request of each round (median): ` +
      `steps ${m.steps.round_spread_ms.join(', ')}; openai-node ${m.openai_node.round_spread_ms.join(', ')}`);
  }
  const end = machine();
  summary.machine = { nproc: start.nproc, cpu: start.cpu, load_start: start.load, load_end: end.load,
    node: process.version };
  lines.push(`machine: ${start.nproc} CPUs, ${start.cpu}; load average ${start.load.join(' ')} at the ` +
    `start, ${end.load.join(' ')} at the end`);
  console.log(lines.join('\n'));
  const json = JSON.stringify(summary);
  console.log(json);
  if (o.json) writeFileSync(o.json, `${json}\n`);
  // A folder of its own making goes; one given with --work stays. On a
  // failure (fail() exits before this) it stays too, for a look.
  if (!o.work) rmSync(work, { recursive: true, force: true });
}

main().catch((e) => fail(e.stack || e.message));
