// A gate decided from the web UI in a real browser (Debian's chromium,
// driven by playwright-core) against a live `steps ui` while `steps run`
// waits on the gate: the page shows the gate's message, who may decide and
// a countdown to its deadline that decreases; the reader types a reason and
// clicks Reject; the run ends failed, and the gate's record says rejected,
// via ui, with the reason, both on the page and in `steps show --json`. A
// gate with approvers shows the command they decide it with, no buttons.
//
//   node gate_page_test.mjs STEPS_BINARY SCREENSHOT_DIR
//
// It saves ui-gate.png (the waiting gate's step) there.
import { chromium } from 'playwright-core';
import { spawn, spawnSync } from 'node:child_process';
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

const dir = mkdtempSync(join(tmpdir(), 'steps-browser-gate-'));
const state = join(dir, 'state');
const file = join(dir, 'release.yaml');
// Only tasks and a gate: no --mock, so nothing decides the gate but a person.
writeFileSync(file, `jobs:
- name: release
  plan:
  - task: build
    run: echo built
  - in_parallel:
    - gate: deploy-approval
      message: Deploy build 42 to production?
      timeout: 2m
    # Prints while the gate waits, so the page redraws as the reason is
    # typed; stops once the test has seen that (bounded at 60 s).
    - task: ticker
      run: |
        for i in $(seq 600); do [ -e '${join(dir, 'stop-ticker')}' ] && break; echo "tick $i"; sleep 0.1; done
  - task: deploy
    run: echo deployed
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
// "1m58s" -> 118, "45.2s" -> 45.2.
const seconds = t => {
  const m = t.match(/(?:(\d+)m)?(?:([\d.]+)s)?/);
  return (Number(m[1] || 0) * 60) + Number(m[2] || 0);
};

let browser;
try {
  const ui = start(['ui', '--listen', '127.0.0.1:0', '--state-dir', state]);
  // The link it prints carries the token decisions need.
  const link = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('steps ui did not start')), 20000);
    ui.stdout.on('data', d => {
      out += d;
      const m = out.match(/http:\/\/[0-9.]+:\d+\/\?token=[0-9a-f]{64}/);
      if (m) { clearTimeout(timer); resolve(m[0]); }
    });
  });
  const url = link.replace(/\?token=.*$/, '');
  const run = start(['run', file, '--plain', '--state-dir', state]);
  let runOutput = '';
  run.stdout.on('data', d => { runOutput += d; });
  const runExit = new Promise(resolve => run.on('exit', code => resolve(code)));

  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  // Without the link's token (a page opened at the bare address), the
  // gate shows how to decide it but no buttons.
  const bare = await browser.newPage({ viewport: { width: 1000, height: 640 } });
  await bare.goto(url + '#latest');
  const hint = bare.locator('.gate[data-gate="release:2.1"] .gate-no-token');
  await hint.waitFor({ state: 'visible', timeout: 30000 });
  check(/open the link steps ui printed/.test(await hint.textContent()) &&
        await bare.locator('.gate[data-gate="release:2.1"] button').count() === 0,
        'without the token the page offers no buttons, and says where the link is');
  await bare.close();

  const page = await browser.newPage({ viewport: { width: 1000, height: 640 } });
  await page.goto(link + '#latest');
  check(!page.url().includes('token='), `the token leaves the address bar (${page.url()})`);
  await page.reload();

  // The waiting gate: its message, who may decide, a countdown, buttons.
  const gate = page.locator('.gate[data-gate="release:2.1"]');
  const left = gate.locator('.gate-left');
  await left.waitFor({ state: 'visible', timeout: 30000 });
  check(await gate.locator('.gate-message').textContent() === 'Deploy build 42 to production?',
        "the gate's message is shown");
  check(await gate.locator('.gate-who').textContent() === 'anyone', 'who may decide: anyone');
  const t1 = await left.textContent();
  check(/left$/.test(t1) && seconds(t1) > 100 && seconds(t1) <= 120,
        `a countdown to the gate's 2m deadline ("${t1}")`);
  await page.waitForFunction(
      before => {
        const e = document.querySelector('.gate[data-gate="release:2.1"] .gate-left');
        return e && e.textContent !== before;
      }, t1, { timeout: 10000 });
  const t2 = await left.textContent();
  check(seconds(t2) < seconds(t1), `the countdown decreases without a reload ("${t1}" then "${t2}")`);
  const approve = gate.locator('button.approve');
  const reject = gate.locator('button.reject');
  check(await approve.isVisible() && await reject.isVisible(), 'Approve and Reject buttons are shown');

  // The reason survives the page's redraws while it is typed.
  const reasonBox = gate.locator('textarea.gate-reason');
  await reasonBox.click();
  await reasonBox.pressSequentially('Not on a Friday', { delay: 20 });
  check(await reasonBox.inputValue() === 'Not on a Friday', 'the reason is typed into the box');
  // The ticker's lines redraw the page: the reason and its focus stay.
  const ticks = page.locator('.step', { hasText: 'task: ticker' }).locator('details.log summary');
  const ticksBefore = await ticks.textContent();
  await page.waitForFunction(
      before => {
        const step = [...document.querySelectorAll('.step')].find(s => s.textContent.includes('task: ticker'));
        const summary = step && step.querySelector('details.log summary');
        return summary && summary.textContent !== before;
      }, ticksBefore, { timeout: 10000 });
  const kept = await page.evaluate(() => {
    const box = document.querySelector('.gate[data-gate="release:2.1"] textarea.gate-reason');
    return { value: box.value, focused: document.activeElement === box };
  });
  check(kept.value === 'Not on a Friday' && kept.focused,
        `the reason and its focus survive a redraw (${ticksBefore} then later: ${JSON.stringify(kept)})`);
  await page.locator('.step[data-step="release:2.1"]').screenshot({ path: join(shots, 'ui-gate.png') });
  await reject.click();
  writeFileSync(join(dir, 'stop-ticker'), '');

  // The page shows the decision and the failed run.
  await page.waitForFunction(() => {
    const g = document.querySelector('.gate[data-gate="release:2.1"] .gate-ended');
    return g && g.querySelector('.badge').textContent === 'rejected';
  }, null, { timeout: 30000 });
  const ended = await gate.locator('.gate-ended').textContent();
  check(/by \S+@\S+ \(via ui\): Not on a Friday/.test(ended),
        `the page shows who rejected it, via ui, and why (${JSON.stringify(ended)})`);
  check(await gate.locator('button').count() === 0, 'no buttons once decided');
  const code = await runExit;
  check(code === 1, `the run ends failed (exit ${code})`);
  check(runOutput.includes("GATE_REJECTED: Gate 'deploy-approval' was rejected by") &&
        runOutput.includes('(via ui)') && !runOutput.includes('deployed'),
        `the run says why and deploys nothing (${JSON.stringify(runOutput.slice(-400))})`);
  await page.waitForFunction(
      () => document.querySelector('.card .badge').textContent === 'failed',
      null, { timeout: 15000 });
  check(true, 'the page shows the run failed');

  // The record, as `steps show --json` prints it.
  const shown = spawnSync(steps, ['show', '--json', '--state-dir', state], { encoding: 'utf8' });
  const record = JSON.parse(shown.stdout);
  const step = record.jobs[0].steps.find(s => s.name === 'deploy-approval');
  check(record.outcome === 'failed', `the recorded run failed (${record.outcome})`);
  check(step && step.outcome === 'failed' && step.gate.state === 'rejected',
        `the gate's record says rejected (${JSON.stringify(step && step.gate)})`);
  check(step && / \(via ui\)$/.test(step.gate.taken_by || ''),
        `taken by the UI's user, via ui (${step && step.gate.taken_by})`);
  check(step && step.gate.reason === 'Not on a Friday', 'with the reason typed');

  // A gate with approvers: the page cannot tell who clicks, so it shows the
  // command its approvers decide it with, and no buttons.
  const guardedFile = join(dir, 'guarded.yaml');
  writeFileSync(guardedFile, `jobs:
- name: guarded
  plan:
  - gate: production
    approvers: [alice, ops]
    timeout: 2m
`);
  const guarded = start(['run', guardedFile, '--plain', '--state-dir', state]);
  const guardedExit = new Promise(resolve => guarded.on('exit', code => resolve(code)));
  await page.goto(url + '#');
  await page.waitForFunction(
      () => document.querySelectorAll('.runrow').length === 2, null, { timeout: 30000 });
  await page.goto(url + '#latest');
  const cli = page.locator('.gate[data-gate="guarded:1"] .gate-cli');
  await cli.waitFor({ state: 'visible', timeout: 30000 });
  const cliText = await cli.textContent();
  check(/^Only alice, ops may decide this gate/.test(cliText) &&
        /run steps approve \S+ guarded:1 \(or steps reject \S+ guarded:1 --reason TEXT\)/.test(cliText),
        `a gate with approvers names the command to use (${JSON.stringify(cliText)})`);
  check(await page.locator('.gate[data-gate="guarded:1"] button').count() === 0 &&
        await page.locator('.gate[data-gate="guarded:1"] .gate-who').textContent() === 'alice, ops',
        'and shows who may decide, without buttons');
  guarded.kill('SIGTERM');
  check(await guardedExit === 143, 'the guarded run ends on SIGTERM');
} catch (e) {
  check(false, `browser test: ${e.message}`);
} finally {
  if (browser) await browser.close();
}
cleanup();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
