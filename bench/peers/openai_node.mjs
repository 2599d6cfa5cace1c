// The openai-node contender: the same conversations as `steps run`, written
// the way a user of the official `openai` package would write them.
//
//   node openai_node.mjs long   --base-url URL --model M --dir DIR --tools FILE --turns N
//   node openai_node.mjs fanout --base-url URL --dir DIR --tools FILE --width N --turns 3
//   node openai_node.mjs startup --base-url URL
//
// long: one conversation, "Read the files.", answering every read_file call
// with the file's text, until an answer without tool calls.
// fanout: N such conversations at once in this one process (one async loop
// each), the i-th opening with "conversation i" (what the fan-out mock keys
// them by). startup: the client made, no request sent (the fixed cost).
// Both check that every conversation took exactly --turns requests and
// ended with the answer "done", and print one JSON line:
// {"conversations":N,"requests":R,"ok":true}. Exit 0 only when ok.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';

function options(argv) {
  const o = { mode: argv[0] };
  for (let i = 1; i + 1 < argv.length; i += 2) {
    o[argv[i].replace(/^--/, '')] = argv[i + 1];
  }
  return o;
}

// One conversation; resolves to the number of requests it took.
async function converse(client, model, tools, dir, opening, turns) {
  const messages = [{ role: 'user', content: opening }];
  for (let request = 1; request <= turns; ++request) {
    const completion = await client.chat.completions.create({
      model, messages, tools,
    });
    const message = completion.choices[0].message;
    messages.push(message);
    const calls = message.tool_calls ?? [];
    if (calls.length === 0) {
      if (message.content !== 'done') {
        throw new Error(`answer ${JSON.stringify(message.content)}, expected "done"`);
      }
      return request;
    }
    for (const call of calls) {
      const { path } = JSON.parse(call.function.arguments);
      messages.push({
        role: 'tool',
        tool_call_id: call.id,
        content: readFileSync(join(dir, path), 'utf8'),
      });
    }
  }
  throw new Error(`no answer after ${turns} requests`);
}

async function main() {
  const o = options(process.argv.slice(2));
  const turns = Number(o.turns);
  const tools = o.tools ? JSON.parse(readFileSync(o.tools, 'utf8')) : [];
  const client = new OpenAI({
    apiKey: 'mock', baseURL: o['base-url'], maxRetries: 0,
  });
  let width = 1;
  let results;
  if (o.mode === 'long') {
    results = [await converse(client, o.model, tools, o.dir, 'Read the files.', turns)];
  } else if (o.mode === 'startup') {
    // The fixed cost: node, the package loaded, a client made; no request.
    console.log(JSON.stringify({ conversations: 0, requests: 0, ok: client !== null }));
    return;
  } else if (o.mode === 'fanout') {
    width = Number(o.width);
    const loops = [];
    for (let i = 1; i <= width; ++i) {
      loops.push(converse(client, 'fanout', tools, o.dir, `conversation ${i}`, turns));
    }
    results = await Promise.all(loops);
  } else {
    throw new Error(`unknown mode '${o.mode}' (long or fanout)`);
  }
  const requests = results.reduce((a, b) => a + b, 0);
  const ok = results.length === width && results.every((r) => r === turns);
  console.log(JSON.stringify({ conversations: results.length, requests, ok }));
  process.exitCode = ok ? 0 : 1;
}

main().catch((e) => {
  console.error(`openai_node: ${e.message}`);
  console.log(JSON.stringify({ ok: false, error: e.message }));
  process.exitCode = 1;
});
