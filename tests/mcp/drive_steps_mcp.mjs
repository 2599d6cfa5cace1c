// `steps mcp` driven by the official TypeScript MCP client
// (@modelcontextprotocol/sdk: Client + StdioClientTransport), as a coding
// agent would: it lists the tools, validates a broken pipeline and reads
// the error with its line, runs a fixture pipeline under the mock in the
// background and polls `status` until the run has succeeded, then reads
// its record with `show`.
//
//   node drive_steps_mcp.mjs STEPS_BINARY FIXTURE
//
// FIXTURE is a pipeline with a mock: block that succeeds under `--mock`.
// The SDK comes from tests/mcp/node_modules (scripts/install-deps); without
// it the test fails and says so.
import { mkdtempSync, writeFileSync, copyFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, basename } from 'node:path';

const [steps, fixture] = process.argv.slice(2);
let passed = 0;
let failed = 0;
function check(ok, what, detail = '') {
  if (ok) { passed++; console.log(`ok    ${what}`); } else { failed++; console.log(`FAIL  ${what}${detail ? `\n${detail}` : ''}`); }
}
function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

let Client;
let StdioClientTransport;
try {
  ({ Client } = await import('@modelcontextprotocol/sdk/client/index.js'));
  ({ StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js'));
} catch (e) {
  check(false, `@modelcontextprotocol/sdk is not installed in tests/mcp/node_modules (run scripts/install-deps): ${e.message}`);
  finish();
}

const dir = mkdtempSync(join(tmpdir(), 'steps-mcp-sdk-'));
const pipeline = basename(fixture);
copyFileSync(fixture, join(dir, pipeline));
// `timeout: soon` is not a duration: refused at line 5.
writeFileSync(join(dir, 'broken.yaml'), `jobs:
- name: build
  plan:
  - task: compile
    timeout: soon
    run: make
`);

const text = (result) => result.content.map((c) => c.text ?? '').join('');
const transport = new StdioClientTransport({ command: steps, args: ['mcp', '--root', dir], stderr: 'inherit' });
const client = new Client({ name: 'steps-sdk-test', version: '1.0.0' });
// Every step below is bounded, so a hang fails the test instead of the suite.
const timeout = setTimeout(() => { check(false, 'finished within 150 s'); finish(); }, 150_000);

try {
  await client.connect(transport);
  check(client.getServerVersion()?.name === 'steps', 'the server says it is steps');

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify(['approve', 'explain', 'reject', 'run', 'runs', 'show', 'status', 'validate']),
    'tools/list names validate, explain, run, status, show, runs, approve, reject', JSON.stringify(names));
  check(tools.every((t) => t.description && t.inputSchema?.type === 'object'), 'every tool has a description and an object inputSchema');

  const broken = await client.callTool({ name: 'validate', arguments: { file: 'broken.yaml' } });
  check(broken.isError === true, 'validate of a broken pipeline is an error');
  check(/broken\.yaml:5: error: /.test(text(broken)), 'the error carries its file and line', text(broken));

  const outside = await client.callTool({ name: 'validate', arguments: { file: '/etc/passwd' } });
  check(outside.isError === true && /outside/.test(text(outside)), 'a path outside the root is refused', text(outside));

  const started = await client.callTool({ name: 'run', arguments: { file: pipeline, mock: true } });
  const run = started.structuredContent?.run;
  check(!started.isError && typeof run === 'string', 'run answers at once with a run id', text(started));

  let status;
  for (let i = 0; i < 30; i++) {
    const answer = await client.callTool({ name: 'status', arguments: { run, wait_seconds: 5 } });
    status = answer.structuredContent;
    if (answer.isError || status?.finished) break;
  }
  check(status?.status === 'succeeded', 'status polled to the outcome: succeeded', JSON.stringify(status, null, 1));
  check(/\(via mcp\)/.test(status?.taken_by ?? ''), 'the run was taken via mcp', status?.taken_by);

  const shown = await client.callTool({ name: 'show', arguments: { run } });
  check(!shown.isError && text(shown).includes(`Run ${run}  succeeded`), 'show prints the recorded run', text(shown));
} catch (e) {
  check(false, `the exchange went through: ${e.stack ?? e}`);
} finally {
  clearTimeout(timeout);
  await client.close().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
finish();
