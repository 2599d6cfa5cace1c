// A collector for the trace tests: takes OTLP/HTTP trace exports on
// loopback (application/x-protobuf or application/json), decodes each with
// the official OTLP definitions (the protobuf root generated from
// opentelemetry-proto that @opentelemetry/otlp-transformer ships), and
// appends what it read to --out, one JSON line per export:
//   {"contentType": ..., "resource": {key: value}, "scope": {...},
//    "spans": [{traceId, spanId, parentSpanId, name, kind, start, end,
//               attributes: {key: value}, events: [...], status}]}
// A body the definitions do not take (for JSON: a key they do not know, or
// a value of the wrong type) gets 400 and a line {"error": ...}.
//
//   node otlp_receiver.mjs --out FILE [--mode ok|fail|slow] [--delay-ms N]
//
// prints "listening on http://127.0.0.1:PORT" once it listens. --mode fail
// answers 500 to every export; slow answers after --delay-ms (default 5000).
import { createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
import http from 'node:http';

const require = createRequire(import.meta.url);
const root = require(
    '@opentelemetry/otlp-transformer/build/src/generated/root.js');
const Request =
    root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const out = arg('--out');
const mode = arg('--mode', 'ok');
const delayMs = Number(arg('--delay-ms', '5000'));
if (!out) {
  console.error('otlp_receiver: --out FILE is required');
  process.exit(64);
}

const toObjectOptions =
    {longs: String, enums: Number, bytes: String, arrays: true};

const hex = (b64) => Buffer.from(b64 || '', 'base64').toString('hex');
const b64 = (h) => Buffer.from(h || '', 'hex').toString('base64');

function anyValue(v) {
  if (v === undefined || v === null) return null;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('arrayValue' in v) return (v.arrayValue.values || []).map(anyValue);
  return {unknown: v};
}

function attributes(list) {
  const o = {};
  for (const kv of list || []) o[kv.key] = anyValue(kv.value);
  return o;
}

function flatten(request, contentType) {
  const result = {contentType, resource: {}, scope: {}, spans: []};
  for (const rs of request.resourceSpans || []) {
    result.resource = attributes(rs.resource && rs.resource.attributes);
    for (const ss of rs.scopeSpans || []) {
      result.scope = ss.scope || {};
      for (const s of ss.spans || []) {
        result.spans.push({
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name,
          kind: s.kind,
          start: s.startTimeUnixNano,
          end: s.endTimeUnixNano,
          attributes: attributes(s.attributes),
          events: (s.events || []).map(e => ({
                                         name: e.name,
                                         time: e.timeUnixNano,
                                         attributes: attributes(e.attributes),
                                       })),
          status: s.status || {},
        });
      }
    }
  }
  return result;
}

// OTLP/JSON writes ids in hex where the protobuf JSON mapping has base64.
function idsToBase64(o) {
  for (const rs of o.resourceSpans || []) {
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        for (const k of ['traceId', 'spanId', 'parentSpanId']) {
          if (typeof s[k] === 'string') s[k] = b64(s[k]);
        }
      }
    }
  }
  return o;
}

// Whether `a` (what was sent) and `b` (what the definitions kept of it)
// agree: every key sent is one the definitions know, with its value.
function sameShape(a, b, path) {
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return `${path}: array`;
    for (let i = 0; i < a.length; i++) {
      const why = sameShape(a[i], b[i], `${path}[${i}]`);
      if (why) return why;
    }
    return null;
  }
  if (a !== null && typeof a === 'object') {
    if (b === null || typeof b !== 'object') return `${path}: object`;
    for (const k of Object.keys(a)) {
      if (!(k in b)) return `${path}.${k}: not a field of OTLP`;
      const why = sameShape(a[k], b[k], `${path}.${k}`);
      if (why) return why;
    }
    return null;
  }
  return String(a) === String(b) ? null : `${path}: ${a} read as ${b}`;
}

function decode(body, contentType) {
  if (contentType.startsWith('application/x-protobuf')) {
    return Request.toObject(Request.decode(body), toObjectOptions);
  }
  if (contentType.startsWith('application/json')) {
    const sent = idsToBase64(JSON.parse(body.toString('utf8')));
    const kept = Request.toObject(Request.fromObject(sent), toObjectOptions);
    const why = sameShape(sent, kept, '$');
    if (why) throw new Error(why);
    return kept;
  }
  throw new Error(`content type ${contentType}`);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', c => chunks.push(c));
  req.on('end', () => {
    const answer = () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      if (mode === 'fail') {
        res.writeHead(500, {'content-type': 'text/plain'}).end('down');
        return;
      }
      const contentType = req.headers['content-type'] || '';
      try {
        const line = flatten(decode(Buffer.concat(chunks), contentType),
                             contentType);
        line.headers = req.headers;
        appendFileSync(out, JSON.stringify(line) + '\n');
        res.writeHead(200, {'content-type': contentType}).end();
      } catch (e) {
        appendFileSync(out, JSON.stringify({error: String(e)}) + '\n');
        res.writeHead(400, {'content-type': 'text/plain'}).end(String(e));
      }
    };
    if (mode === 'slow') {
      setTimeout(answer, delayMs);
    } else {
      answer();
    }
  });
});
server.listen(0, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => process.exit(0));
}
