#include "ui/server.h"

namespace steps::ui {

const std::string& PageHtml() {
  static const std::string kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>steps</title>
<style>
  :root { --ok: #1a7f37; --fail: #cf222e; --err: #9a6700; --abort: #6e7781; --run: #0969da;
          --bg: #f6f8fa; --card: #fff; --line: #d0d7de; --text: #1f2328; --muted: #656d76; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
         background: var(--bg); color: var(--text); }
  header { display: flex; align-items: center; gap: 12px; padding: 10px 16px;
           background: #24292f; color: #fff; }
  header h1 { font-size: 16px; margin: 0; }
  header a { color: #fff; text-decoration: none; }
  main { max-width: 1000px; margin: 0 auto; padding: 12px; }
  .card { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
          padding: 12px; margin-bottom: 12px; }
  .row { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: baseline; }
  .muted { color: var(--muted); }
  .badge { display: inline-block; padding: 1px 8px; border-radius: 10px; color: #fff;
           font-size: 12px; font-weight: 600; }
  .succeeded, .cached { background: var(--ok); } .failed { background: var(--fail); }
  .errored { background: var(--err); } .aborted, .interrupted { background: var(--abort); }
  .running { background: var(--run); } .badge.not.started { background: var(--muted); }
  table { width: 100%; border-collapse: collapse; }
  td, th { text-align: left; padding: 4px 6px; border-top: 1px solid var(--line);
           vertical-align: top; }
  .step { border-top: 1px solid var(--line); padding: 8px 0; }
  .step:first-child { border-top: 0; }
  .attempt { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px;
             margin-left: 14px; }
  .turn { font-size: 12px; margin-left: 14px; }
  .clock { font-variant-numeric: tabular-nums; }
  .left { color: var(--run); font-weight: 600; }
  pre { white-space: pre-wrap; word-break: break-word; background: var(--bg); padding: 6px;
        border-radius: 4px; font-size: 12px; max-height: 240px; overflow: auto; margin: 4px 0; }
  .error { color: var(--fail); }
  pre.log { max-height: 320px; }
  .stderr { color: var(--fail); } .logline { color: var(--muted); }
  a.run { color: var(--text); text-decoration: none; display: block; }
  @media (max-width: 600px) { main { padding: 6px; } .card { padding: 8px; } }
</style>
</head>
<body>
<header><h1><a href="#">steps</a></h1><span id="where" class="muted"></span></header>
<main id="main"><p class="muted">Loading…</p></main>
<script>
"use strict";
let offset = 0;          // server clock minus ours, from now_ms
let current = null;      // the run shown, or null for the list
let runId = null;        // its id, once loaded ("latest" resolved)
let shown = null;        // the run as last drawn (JSON text)
let timer = null;
const logs = new Map();   // run|step -> {lines: [], last: 0, busy: false}
const opened = new Set(); // details the reader opened (by data-key)
const closed = new Set(); // and those they closed
const kShownLines = 1000; // a log shows its last lines; log.txt has them all

const esc = s => String(s ?? "").replace(/[&<>"']/g,
  c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const now = () => Date.now() + offset;
function dur(ms) {
  if (ms == null) return "";
  if (ms < 1000) return ms + "ms";
  const s = ms / 1000;
  if (s < 60) return (Math.round(s * 10) / 10) + "s";
  const m = Math.floor(s / 60), r = Math.floor(s % 60);
  if (m < 60) return m + "m" + (r ? r + "s" : "");
  return Math.floor(m / 60) + "h" + (m % 60 ? (m % 60) + "m" : "");
}
const badge = st => `<span class="badge ${esc(st)}">${esc(st)}</span>`;
const when = ms => ms ? new Date(ms).toLocaleString() : "";

// Elapsed and time left of anything running; ticks between polls.
function clock(item) {
  if (item.status !== "running") return item.duration_ms != null ? dur(item.duration_ms) : "";
  let t = `<span class="clock" data-start="${item.started_ms}">${dur(now() - item.started_ms)}</span>`;
  if (item.deadline_ms) {
    t += ` · <span class="clock left" data-deadline="${item.deadline_ms}">` +
         `${dur(Math.max(0, item.deadline_ms - now()))} left</span>`;
  }
  return t;
}
function tick() {
  document.querySelectorAll("[data-start]").forEach(e => {
    e.textContent = dur(now() - Number(e.dataset.start)); });
  document.querySelectorAll("[data-deadline]").forEach(e => {
    e.textContent = dur(Math.max(0, Number(e.dataset.deadline) - now())) + " left"; });
}
setInterval(tick, 250);

async function getJson(url) {
  const r = await fetch(url, {cache: "no-store"});
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  offset = j.now_ms - Date.now();
  return j;
}

function stepHtml(s) {
  const label = (s.hook ? s.hook + " " : "") + (s.fixer ? "fix " : "") + s.kind + ": " + s.name;
  let h = `<div class="step" data-step="${esc(s.id)}"><div class="row">${badge(s.status)}` +
          `<strong>${esc(label)}</strong><span class="muted">line ${s.line}</span>` +
          `<span>${clock(s)}</span>`;
  if (s.agent) {
    h += `<span class="muted">${s.agent.turns} turns · ${s.agent.provider_requests} requests · ` +
         `${s.agent.tokens} tokens${s.agent.usd ? " · $" + s.agent.usd.toFixed(4) : ""}` +
         `${s.agent.nudge_sent ? " · nudged" : ""}` +
         `${s.agent.fallbacks_taken.length ? " · fell back to " + esc(s.agent.fallbacks_taken.join(", ")) : ""}</span>`;
  }
  h += `</div>`;
  if (s.cached_from) {
    h += `<div class="muted">cached from run ${esc(s.cached_from.run)}, step ${esc(s.cached_from.step)}</div>`;
  }
  if (s.error) h += `<div class="error">${esc(s.error)}</div>`;
  for (const a of s.attempts) {
    h += `<div class="attempt">(attempt ${a.number}/${a.of}) ${badge(a.status)} ` +
         `${a.status === "running" ? clock(a) : dur(a.duration_ms)}${a.hash ? "  hash: " + esc(a.hash) : ""}` +
         `${a.clipped_to_ms != null ? "  clipped to " + a.clipped_to_ms + "ms" : ""}` +
         `${a.exhausted_by ? "  exhausted by " + esc(a.exhausted_by) : ""}` +
         `${a.fixed ? "  (after fix)" : ""}${a.error ? "  " + esc(a.error) : ""}` +
         `<div class="muted">Taken by: ${esc(a.taken_by)}</div></div>`;
  }
  for (const t of s.turns) {
    h += `<div class="turn">turn ${t.turn}${t.provider_requests > 1 ? " (" + t.provider_requests + " requests)" : ""}: ` +
         esc(t.tool_calls.length ? t.tool_calls.join("  ") : t.text) + `</div>`;
  }
  if (s.log_lines > 0 || s.status === "running") {
    const key = "log:" + s.id;
    // A running step's log is open unless the reader closed it.
    const open = opened.has(key) || (s.status === "running" && !closed.has(key));
    h += `<details class="log" data-key="${esc(key)}" data-step="${esc(s.id)}" ` +
         `data-lines="${s.log_lines}"${open ? " open" : ""}><summary class="muted">log · ` +
         `${s.log_lines} line${s.log_lines === 1 ? "" : "s"}</summary>` +
         `<pre class="log">${logHtml(s.id)}</pre></details>`;
  }
  if (s.output) {
    const key = "out:" + s.id;
    h += `<details data-key="${esc(key)}"${opened.has(key) ? " open" : ""}>` +
         `<summary class="muted">output</summary><pre>${esc(s.output)}</pre></details>`;
  }
  return h + `</div>`;
}

// The lines of a step's log known so far, the last kShownLines of them.
function logHtml(step) {
  const log = logs.get(runId + "|" + step);
  if (!log || !log.lines.length) return "";
  const skip = Math.max(0, log.lines.length - kShownLines);
  let h = skip ? `<span class="muted">… ${skip} earlier lines: <a target="_blank" href="api/runs/` +
                 `${encodeURIComponent(runId)}/log.txt?step=${encodeURIComponent(step)}">the whole log</a>` +
                 `</span>\n` : "";
  for (let i = skip; i < log.lines.length; i++) {
    const l = log.lines[i];
    const cls = l.stream === "stderr" ? "stderr" : l.stream === "log" ? "logline" : "";
    h += (cls ? `<span class="${cls}">${esc(l.text)}</span>` : esc(l.text)) + "\n";
  }
  return h;
}

// Fetches the lines of an open log that the page has not seen yet.
async function fillLog(details) {
  const step = details.dataset.step, key = runId + "|" + step;
  let log = logs.get(key);
  if (!log) logs.set(key, log = {lines: [], last: 0, busy: false});
  if (log.busy || log.last >= Number(details.dataset.lines)) return;
  log.busy = true;
  try {
    const run = runId;
    const j = await getJson(`api/runs/${encodeURIComponent(run)}/log?step=` +
                            `${encodeURIComponent(step)}&after=${log.last}`);
    if (run !== runId) return;
    for (const l of j.lines) log.lines.push(l);
    if (j.lines.length) log.last = j.lines[j.lines.length - 1].seq;
    if (j.last_seq > Number(details.dataset.lines)) details.dataset.lines = j.last_seq;
  } catch (e) {
    return;  // The next refresh tries again.
  } finally {
    log.busy = false;
  }
  showLog(step);
  if (log.last < Number(details.dataset.lines)) fillLog(details);
}

// Redraws a log in place, following its end when the reader was there.
function showLog(step) {
  const d = document.querySelector(`details.log[data-step="${CSS.escape(step)}"]`);
  if (!d) return;
  const pre = d.querySelector("pre");
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.innerHTML = logHtml(step);
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}

document.addEventListener("toggle", e => {
  const key = e.target.dataset && e.target.dataset.key;
  if (!key) return;
  if (e.target.open) { opened.add(key); closed.delete(key); }
  else { opened.delete(key); closed.add(key); }
  if (e.target.open && e.target.classList.contains("log")) fillLog(e.target);
}, true);

function runHtml(r) {
  let h = `<div class="card"><div class="row">${badge(r.status)}<strong>run ${esc(r.id)}</strong>` +
          `<span class="muted">${esc(r.file)}</span><span>${when(r.started_ms)}</span>` +
          `<span>${clock(r)}</span><span class="muted">Taken by: ${esc(r.taken_by)}</span></div></div>`;
  for (const j of r.jobs) {
    h += `<div class="card" data-job="${esc(j.name)}"><div class="row">${badge(j.status)}` +
         `<strong>job ${esc(j.name)}</strong><span>${clock(j)}</span>` +
         `<span class="muted">execution: [${esc(j.execution.join(", "))}]</span></div>`;
    if (j.error) h += `<div class="error">${esc(j.error)}</div>`;
    for (const s of j.steps) h += stepHtml(s);
    h += `</div>`;
  }
  return h;
}

async function refresh() {
  clearTimeout(timer);
  const main = document.getElementById("main");
  try {
    if (current) {
      const j = await getJson("api/runs/" + encodeURIComponent(current));
      document.getElementById("where").textContent = "run " + j.run.id;
      if (j.run.id !== runId) { runId = j.run.id; logs.clear(); }
      // Nothing new: keep the page as it is (a selection, a scrolled log);
      // the clocks tick on their own.
      const text = JSON.stringify(j.run);
      if (text === shown) {
        timer = setTimeout(refresh, j.run.status === "running" ? 1000 : 5000);
        return;
      }
      shown = text;
      // Where each log was scrolled, to keep it across the redraw.
      const scrolled = new Map();
      main.querySelectorAll("details.log pre").forEach(p => scrolled.set(
        p.parentElement.dataset.step, p.scrollTop + p.clientHeight >= p.scrollHeight - 4
          ? Infinity : p.scrollTop));
      main.innerHTML = runHtml(j.run);
      main.querySelectorAll("details.log").forEach(d => {
        const pre = d.querySelector("pre"), at = scrolled.get(d.dataset.step);
        pre.scrollTop = at === undefined || at === Infinity ? pre.scrollHeight : at;
        if (d.open) fillLog(d);
      });
      if (j.run.status === "running") timer = setTimeout(refresh, 1000);
      else timer = setTimeout(refresh, 5000);
    } else {
      const j = await getJson("api/runs");
      document.getElementById("where").textContent = j.runs.length + " runs";
      main.innerHTML = j.runs.length ? `<div class="card"><table><tr><th></th><th>run</th>` +
        `<th>file</th><th>started</th><th>took</th></tr>` + j.runs.map(r =>
          `<tr><td>${badge(r.status)}</td><td><a class="run" href="#${esc(r.id)}">${esc(r.id)}</a></td>` +
          `<td>${esc(r.file)}</td><td>${when(r.started_ms)}</td><td>${clock(r)}</td></tr>`).join("") +
        `</table></div>` : `<p class="muted">No runs yet: start one with <code>steps run FILE</code>.</p>`;
      timer = setTimeout(refresh, 2000);
    }
  } catch (e) {
    shown = null;
    main.innerHTML = `<p class="error">${esc(e.message)}</p>`;
    timer = setTimeout(refresh, 2000);
  }
}
function route() {
  current = location.hash.slice(1) || null;
  logs.clear(); opened.clear(); closed.clear(); shown = null;
  refresh();
}
window.addEventListener("hashchange", route);
route();
</script>
</body>
</html>
)HTML";
  return kPage;
}

}  // namespace steps::ui
