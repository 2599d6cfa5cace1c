// The fan-out's mock: an OpenAI-compatible chat completions endpoint that
// answers any number of concurrent conversations, each late by --delay-ms.
//
//   node fanout_mock.mjs [--turns 3] [--delay-ms 1000]
//
// Prints "listening on http://127.0.0.1:PORT" once ready. It answers by the
// conversation's own state, carried in each request: with fewer than
// TURNS-1 tool results so far, one read_file call (f0.txt, f1.txt, ...);
// then the answer "done". A conversation is known by its first message
// ("conversation 17"), and the mock counts the requests of each:
// GET /_stats says {"requests":R,"conversations":C,"bad":B,"max_in_flight":M},
// B counting the conversations that did not take exactly TURNS requests or
// sent a request the mock could not read, M the most requests it held
// waiting at once; POST /_reset clears the counts. "rounds" says when the
// requests of each round (the first request of every conversation, the
// second, ...) came, in ms since the first request after the last reset:
// [{"first_ms":F,"last_ms":L}, ...]. The spread of a round is how long the
// contender took to send it to every conversation.
//
// Why not mock_provider: its scripts are picked by agent, step and model,
// which every cell of an `across` shares, and its HTTP server holds one of
// 64 threads per connection, so 1000 conversations in flight together
// cannot be served by it.
import http from 'node:http';

const args = process.argv.slice(2);
function option(name, fallback) {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}
const turns = option('turns', 3);
const delayMs = option('delay-ms', 1000);

let requests = 0;
let unreadable = 0;
let inFlight = 0;
let maxInFlight = 0;
let counts = new Map();
let t0 = null;
let rounds = [];

function answer(body) {
  const messages = body.messages;
  const first = messages[0].content;
  const opening = typeof first === 'string' ? first : JSON.stringify(first);
  counts.set(opening, (counts.get(opening) ?? 0) + 1);
  const results = messages.filter((m) => m.role === 'tool').length;
  const now = Number(process.hrtime.bigint() / 1000n) / 1000;
  if (t0 === null) t0 = now;
  const at = now - t0;
  const round = rounds[results] ?? (rounds[results] = { first_ms: at, last_ms: at });
  round.first_ms = Math.min(round.first_ms, at);
  round.last_ms = Math.max(round.last_ms, at);
  const message = { role: 'assistant', refusal: null };
  let finish = 'stop';
  if (results < turns - 1) {
    message.content = null;
    message.tool_calls = [{
      id: `call_${results}`,
      type: 'function',
      function: { name: 'read_file', arguments: JSON.stringify({ path: `f${results}.txt` }) },
    }];
    finish = 'tool_calls';
  } else {
    message.content = 'done';
  }
  return {
    id: `chatcmpl-fanout-${requests}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: body.model,
    system_fingerprint: 'mock',
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

function stats() {
  let bad = unreadable;
  for (const n of counts.values()) if (n !== turns) ++bad;
  const spans = rounds.map((r) => ({ first_ms: Math.round(r.first_ms), last_ms: Math.round(r.last_ms) }));
  return { requests, conversations: counts.size, bad, max_in_flight: maxInFlight, rounds: spans };
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/_stats') {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(stats()));
      return;
    }
    if (req.method === 'POST' && req.url === '/_reset') {
      requests = 0;
      unreadable = 0;
      maxInFlight = inFlight;
      counts = new Map();
      t0 = null;
      rounds = [];
      res.end('{}');
      return;
    }
    if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) {
      res.statusCode = 404;
      res.end('{"error":{"message":"fanout mock: unknown path"}}');
      return;
    }
    ++requests;
    let reply;
    try {
      reply = JSON.stringify(answer(JSON.parse(Buffer.concat(chunks))));
    } catch (e) {
      ++unreadable;
      res.statusCode = 400;
      res.end(JSON.stringify({ error: { message: `fanout mock: ${e.message}` } }));
      return;
    }
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    setTimeout(() => {
      --inFlight;
      res.setHeader('Content-Type', 'application/json');
      res.end(reply);
    }, delayMs);
  });
});
server.keepAliveTimeout = 60000;
server.headersTimeout = 0;
server.requestTimeout = 0;
server.listen(0, '127.0.0.1', 4096, () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
