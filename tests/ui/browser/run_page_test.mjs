// The web UI in a real browser (Debian's chromium, driven by playwright-core)
// against a live `steps ui` while a pipeline with a retried task and a slow
// agent step runs on the mock provider: the steps still to come show greyed
// from the start, the execution list fills in as steps end, the countdown
// is visible and decreases, attempt rows appear, the finished run shows its
// outcome, the timeline draws the retried task's attempts with the wait
// between them, and the runs index fits a phone.
//
//   node run_page_test.mjs STEPS_BINARY SCREENSHOT_DIR
//
// It saves ui-run-page.png, ui-timeline.png and ui-phone-index.png there.
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [steps, shots] = process.argv.slice(2);
const chromiumPath = '/usr/bin/chromium';
let passed = 0;
let failed = 0;
function check(ok, what) {
  if (ok) { passed++; console.log(`ok    ${what}`); } else { failed++; console.log(`FAIL  ${what}`); }
}

if (!existsSync(chromiumPath)) {
  console.log(`FAIL  ${chromiumPath} is missing: scripts/install-deps installs Debian's chromium`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'steps-browser-'));
const state = join(dir, 'state');
// A long file name: the runs index must wrap it on a phone.
const file = join(dir, 'release-candidate-nightly-build-with-a-long-pipeline-file-name.yaml');
writeFileSync(file, `agents:
- name: reviewer
  source: { model: mock/reviewer }
  timeout: 2m
jobs:
- name: release
  plan:
  - task: build
    # The first attempt holds the run on its first step until the test has
    # seen the steps to come (gate build-gate, bounded at 60 s), then fails;
    # the second, after a 1.5 s retry wait, succeeds.
    run: |
      if [ "$STEPS_ATTEMPT" = 1 ]; then
        for _ in $(seq 600); do [ -e '${join(dir, 'build-gate')}' ] && break; sleep 0.1; done
        echo "first try fails"; exit 1
      fi
      echo built
    retry: { max_attempts: 2, base_delay_ms: 1500 }
    timeout: 30s
  - in_parallel:
    - agent: reviewer
      messages: ["Review the release."]
      attempts: 2
    - task: progress
      # Lines 3 to 6 wait for the gate the test opens once it has seen the
      # first two (bounded at 60 s), so "streams in" never depends on speed.
      run: |
        echo "progress 1"; echo "progress 2"
        for _ in $(seq 600); do [ -e '${join(dir, 'gate')}' ] && break; sleep 0.1; done
        for i in 3 4 5 6; do echo "progress $i"; sleep 0.2; done
mock:
  reviewer:
  - status: 500
  - delay: 6s
    say: Release looks good.
`);

const children = [];
function start(args) {
  const child = spawn(steps, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return child;
}
function cleanup() {
  for (const c of children) { try { c.kill('SIGTERM'); } catch {} }
  rmSync(dir, { recursive: true, force: true });
}

let browser;
try {
  // The UI first, on any free port; its first line names the address.
  const ui = start(['ui', '--listen', '127.0.0.1:0', '--state-dir', state]);
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('steps ui did not start')), 20000);
    ui.stdout.on('data', d => {
      out += d;
      const m = out.match(/http:\/\/[0-9.]+:\d+\//);
      if (m) { clearTimeout(timer); resolve(m[0]); }
    });
  });
  const run = start(['run', file, '--mock', '--plain', '--state-dir', state]);
  const runExit = new Promise(resolve => run.on('exit', code => resolve(code)));

  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1000, height: 640 } });
  await page.goto(url + '#latest');

  // On its first step, the run already shows the steps still to come,
  // greyed, and an empty execution list.
  const job = page.locator('.card[data-job="release"]');
  const planned = page.locator('.step.planned');
  await planned.filter({ hasText: 'agent: reviewer' }).waitFor({ timeout: 30000 });
  const buildStep = page.locator('.step[data-step="release:1"]');
  await buildStep.locator('.badge.running').first().waitFor({ timeout: 30000 });
  const plannedNames = await planned.locator('strong').allTextContents();
  check(plannedNames.join('|') === 'agent: reviewer|task: progress',
        `the steps not started yet are listed while the first runs (${JSON.stringify(plannedNames)})`);
  const opacity = Number(await planned.first().evaluate(e => getComputedStyle(e).opacity));
  const badges0 = await planned.locator('.badge').allTextContents();
  check(opacity < 0.8 && badges0.every(b => b === 'pending'),
        `they are greyed and pending (opacity ${opacity}, ${JSON.stringify(badges0)})`);
  const execution = job.locator('.execution');
  check(await execution.textContent() === 'execution: []', 'nothing has ended yet: an empty execution list');

  // The first step ends (after a retry): the execution list names it while
  // the job still runs, and the steps after it start.
  writeFileSync(join(dir, 'build-gate'), '');
  await page.waitForFunction(() => {
    const j = document.querySelector('.card[data-job="release"]');
    return j && j.querySelector('.execution').textContent === 'execution: [build]' &&
           j.querySelector(':scope > .row .badge').textContent === 'running';
  }, null, { timeout: 30000 });
  check(true, 'the execution list fills in live: [build] while the job runs');

  // The running agent step: elapsed time beside a live countdown.
  const reviewer = page.locator('.step', { hasText: 'agent: reviewer' });
  const left = reviewer.locator('> .row .left');
  await left.waitFor({ state: 'visible', timeout: 30000 });
  const seconds = t => {
    const m = t.match(/(?:(\d+)m)?(?:([\d.]+)s)?/);
    return (Number(m[1] || 0) * 60) + Number(m[2] || 0);
  };
  const t1 = await left.textContent();
  check(/left$/.test(t1), `a countdown is visible beside the running agent step ("${t1}")`);
  check(seconds(t1) > 100 && seconds(t1) <= 120, 'it counts down the resolved 2m deadline');
  await page.waitForFunction(
      before => {
        const step = [...document.querySelectorAll('.step')]
            .find(s => s.textContent.includes('agent: reviewer'));
        const e = step && step.querySelector(':scope > .row .left');
        return e && e.textContent !== before;
      }, t1, { timeout: 5000 });
  const t2 = await left.textContent();
  check(seconds(t2) < seconds(t1), `the countdown decreases without a reload ("${t1}" then "${t2}")`);
  const attempts = await page.locator('.attempt').count();
  check(attempts >= 2, `attempt rows appear (${attempts})`);

  // A running task's log is open and grows as it writes, without a reload.
  const progressLog = page.locator('.step', { hasText: 'task: progress' }).locator('details.log');
  await progressLog.locator('pre', { hasText: 'progress 1' }).waitFor({ timeout: 10000 });
  check(await progressLog.evaluate(d => d.open), "the running task's log is open");
  const early = await progressLog.locator('pre').textContent();
  writeFileSync(join(dir, 'gate'), '');
  await progressLog.locator('pre', { hasText: 'progress 3' }).waitFor({ timeout: 10000 });
  const later = await progressLog.locator('pre').textContent();
  check(!early.includes('progress 3') && later.includes('progress 1') && later.includes('progress 3'),
        `its lines stream in as they are written (${JSON.stringify(early)} then ${JSON.stringify(later)})`);
  await page.screenshot({ path: join(shots, 'ui-run-page.png'), fullPage: true });

  // A phone-sized window: nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, `readable in a phone-sized window (overflow ${overflow}px)`);
  await page.setViewportSize({ width: 1000, height: 640 });

  // The finished run shows its outcome.
  const code = await runExit;
  check(code === 0, `the pipeline succeeded (exit ${code})`);
  await page.waitForFunction(
      () => [...document.querySelectorAll('.card .badge')].some(b => b.textContent === 'succeeded') &&
            !document.querySelector('.badge.running'),
      null, { timeout: 15000 });
  const badges = await page.locator('.card .badge').allTextContents();
  check(badges[0] === 'succeeded', `the finished run shows its outcome (${badges[0]})`);
  check(await page.locator('.left').count() === 0, 'no countdown once nothing runs');
  // The agent's own log holds the retried request; a closed log opens on a click.
  const agentLog = reviewer.locator('details.log');
  if (!(await agentLog.evaluate(d => d.open))) await agentLog.locator('summary').click();
  await agentLog.locator('pre', { hasText: 'agent.request_retry' }).waitFor({ timeout: 10000 });
  const agentText = await agentLog.locator('pre').textContent();
  check(/WRN agent\.request_retry agent=reviewer .*status=500/.test(agentText),
        `the agent step's log shows its retried request (${JSON.stringify(agentText)})`);
  const progressText = await progressLog.locator('pre').textContent();
  check(progressText.trim().split('\n').length === 6 && progressText.includes('progress 6'),
        `the finished task's log holds each line once (${JSON.stringify(progressText)})`);
  const finalExecution = await execution.textContent();
  check(/^execution: \[build, (reviewer, progress|progress, reviewer)\]$/.test(finalExecution),
        `the finished job's execution list (${finalExecution})`);

  // The timeline: the retried task's two attempts, the wait between them.
  await page.locator('nav.tabs a', { hasText: 'timeline' }).click();
  const buildRow = page.locator('.tl-row[data-step="release:1"]');
  await buildRow.locator('.tl-attempt').nth(1).waitFor({ timeout: 10000 });
  const box = async l => l.boundingBox();
  const a1 = await box(buildRow.locator('.tl-attempt').nth(0));
  const a2 = await box(buildRow.locator('.tl-attempt').nth(1));
  const wait = await box(buildRow.locator('.tl-wait'));
  check(await buildRow.locator('.tl-attempt').count() === 2, 'one bar per attempt of the retried step');
  check(wait && wait.width >= 4 && a1.x + a1.width <= wait.x + 1 && wait.x + wait.width <= a2.x + 1,
        `a visible wait between its attempts (${JSON.stringify({ a1, wait, a2 })})`);
  const waitColor = await buildRow.locator('.tl-wait').evaluate(e => getComputedStyle(e).backgroundImage);
  check(/gradient/.test(waitColor), 'drawn unlike an attempt (striped)');
  const reviewerRow = page.locator('.tl-row', { hasText: 'reviewer' });
  check(await reviewerRow.locator('.tl-turn').count() === 1, "the agent's turn is a tick on its bar");
  await page.screenshot({ path: join(shots, 'ui-timeline.png'), fullPage: true });

  // The runs index on a phone: nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(url + '#');
  await page.locator('.runrow a.run').first().waitFor({ timeout: 10000 });
  const widths = await page.evaluate(() => {
    const e = document.scrollingElement;
    return { scroll: e.scrollWidth, client: e.clientWidth };
  });
  check(widths.scroll <= widths.client,
        `the runs index fits a 390px phone (scrollWidth ${widths.scroll}, clientWidth ${widths.client})`);
  await page.screenshot({ path: join(shots, 'ui-phone-index.png'), fullPage: true });
} catch (e) {
  check(false, `browser test: ${e.message}`);
} finally {
  if (browser) await browser.close();
}
// `steps ui` stops on SIGTERM (bounded wait).
const ui = children[0];
if (ui && ui.exitCode === null) {
  const stopped = new Promise(resolve => ui.on('exit', (code, sig) => resolve({ code, sig })));
  ui.kill('SIGTERM');
  const r = await Promise.race([stopped, new Promise(r => setTimeout(() => r(null), 10000))]);
  check(r !== null && r.code === 0, `steps ui stops cleanly on SIGTERM (${JSON.stringify(r)})`);
}
cleanup();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
