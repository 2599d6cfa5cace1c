#include "ui/server.h"

namespace steps::ui {

const std::string& PageHtml() {
  static const std::string kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
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
  .pending, .not-started { background: #8c959f; }
  .step.planned { opacity: .55; }
  .step.planned .badge { font-weight: 400; }
  .spend { font-variant-numeric: tabular-nums; }
  header #where { min-width: 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  nav.tabs { display: flex; gap: 4px; margin: 0 0 12px; }
  nav.tabs a { padding: 4px 12px; border: 1px solid var(--line); border-radius: 6px;
               color: var(--text); text-decoration: none; background: var(--card); }
  nav.tabs a.on { background: #24292f; color: #fff; border-color: #24292f; }
  .runrow { display: flex; flex-wrap: wrap; gap: 2px 14px; align-items: baseline;
            padding: 6px 0; border-top: 1px solid var(--line); min-width: 0; }
  .runrow:first-child { border-top: 0; }
  .runrow a.run { font-weight: 600; max-width: 100%; overflow: hidden; text-overflow: ellipsis;
                  white-space: nowrap; }
  .runrow .file { flex: 1 1 14em; min-width: 0; overflow-wrap: anywhere; color: var(--muted); }
  .tl-axis, .tl-row { display: flex; align-items: flex-start; min-height: 26px; }
  .tl-label { flex: 0 0 30%; min-width: 0; padding-right: 8px; font-size: 12px; line-height: 18px;
              overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .tl-track { position: relative; flex: 1 1 auto; height: 26px; min-width: 0;
              border-left: 1px solid var(--line); }
  .tl-axis .tl-track { height: 16px; font-size: 11px; color: var(--muted); border-left: 0; }
  .tl-tick { position: absolute; top: 0; transform: translateX(-50%); white-space: nowrap; }
  .tl-grid { position: absolute; top: 0; bottom: 0; border-left: 1px dashed var(--line); }
  .tl-bar { position: absolute; top: 3px; height: 12px; border-radius: 3px; min-width: 2px; }
  .tl-wait { position: absolute; top: 7px; height: 4px; min-width: 2px;
             background: repeating-linear-gradient(90deg, var(--err) 0 4px, transparent 4px 7px); }
  .tl-down { position: absolute; top: 0; bottom: 0; min-width: 2px; opacity: .5;
             background: repeating-linear-gradient(135deg, var(--muted) 0 3px, transparent 3px 7px); }
  .tl-deadline { position: absolute; top: -1px; bottom: -1px; width: 0;
                 border-left: 2px solid var(--fail); }
  .tl-deadline-later { position: absolute; right: 0; top: 15px; font-size: 10px; line-height: 11px;
                       color: var(--fail); white-space: nowrap; }
  .tl-turn { position: absolute; top: 0; height: 18px; width: 0; border-left: 2px solid #fff;
             box-shadow: 0 0 0 1px var(--text); }
  .tl-nudge { position: absolute; top: -4px; transform: translateX(-50%); font-size: 11px;
              color: var(--err); line-height: 1; }
  .tl-legend { font-size: 12px; margin-top: 8px; display: flex; flex-wrap: wrap; gap: 4px 14px; }
  .tl-legend i { display: inline-block; width: 14px; height: 8px; margin-right: 4px;
                 vertical-align: middle; position: static; }
  .gate { margin: 6px 0 2px 14px; padding: 8px 10px; border-left: 3px solid var(--err);
          background: var(--bg); border-radius: 4px; }
  .gate.ended { border-left-color: var(--line); }
  .gate-message { white-space: pre-wrap; font-weight: 600; margin-bottom: 4px; }
  .gate textarea { display: block; width: 100%; min-height: 3em; margin: 6px 0; font: inherit;
                   padding: 4px 6px; border: 1px solid var(--line); border-radius: 4px; }
  .gate button { font: inherit; font-weight: 600; padding: 4px 14px; border-radius: 6px;
                 border: 1px solid transparent; color: #fff; cursor: pointer; margin-right: 8px; }
  .gate button.approve { background: var(--ok); } .gate button.reject { background: var(--fail); }
  .gate button:disabled { opacity: .5; cursor: default; }
  .gate code { background: var(--card); padding: 0 4px; border-radius: 3px; }
  .approved { background: var(--ok); } .rejected { background: var(--fail); }
  .waiting { background: var(--err); } .expired, .cut { background: var(--abort); }
  @media (max-width: 600px) { main { padding: 6px; } .card { padding: 8px; }
                              .tl-label { flex-basis: 38%; } }
</style>
</head>
<body>
<header><h1><a href="#">steps</a></h1><span id="where" class="muted"></span></header>
<main id="main"><p class="muted">Loading…</p></main>
<script>
"use strict";
let offset = 0;          // server clock minus ours, from the API's "now"
let current = null;      // the run shown, or null for the list
let view = "steps";      // its tab: "steps" or "timeline"
let runId = null;        // its id, once loaded ("latest" resolved)
let shown = null;        // the run as last drawn (JSON text)
let timer = null;
const logs = new Map();   // run|step -> {lines: [], last: 0, busy: false}
const opened = new Set(); // details the reader opened (by data-key)
const closed = new Set(); // and those they closed
const kShownLines = 1000; // a log shows its last lines; log.txt has them all
// What a decision carries: the server's token, from the link `steps ui`
// printed (?token=HEX). Kept for this tab (a reload keeps it) and taken out
// of the address bar, so it is not bookmarked or shared with a screenshot.
const token = (() => {
  const params = new URLSearchParams(location.search);
  const given = params.get("token");
  if (given) {
    try { sessionStorage.setItem("steps-token", given); } catch (e) { /* kept below */ }
    params.delete("token");
    const q = params.toString();
    history.replaceState(null, "", location.pathname + (q ? "?" + q : "") + location.hash);
    return given;
  }
  try { return sessionStorage.getItem("steps-token"); } catch (e) { return null; }
})();
const drafts = new Map(); // run|gate step -> the reason typed so far
const gateNotes = new Map(); // run|gate step -> {sending} or {error}

const esc = s => String(s ?? "").replace(/[&<>"']/g,
  c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const now = () => Date.now() + offset;
// The API's times are RFC 3339 strings (docs/json.md); the page counts in ms.
const tms = t => t == null ? null : Date.parse(t);
// How a step shows: "cached" for one reused from the cache.
const stepOutcome = s => s.cached ? "cached" : s.outcome;
function dur(ms) {
  if (ms == null) return "";
  if (ms < 1000) return ms + "ms";
  const s = ms / 1000;
  if (s < 60) return (Math.round(s * 10) / 10) + "s";
  const m = Math.floor(s / 60), r = Math.floor(s % 60);
  if (m < 60) return m + "m" + (r ? r + "s" : "");
  return Math.floor(m / 60) + "h" + (m % 60 ? (m % 60) + "m" : "");
}
const badge = st => `<span class="badge ${esc(String(st).replace(/ /g, "-"))}">${esc(st)}</span>`;
const when = ms => ms ? new Date(ms).toLocaleString() : "";
// Tokens and cost of anything that spent some (a step, a job, a run).
function spend(x) {
  const tokens = x.prompt_tokens + x.completion_tokens;
  if (x.kind !== "agent" && !tokens && !x.usd) return "";
  if (x.cached) return "";
  return `<span class="spend muted">${tokens} tokens` +
         `${x.usd ? " · $" + x.usd.toFixed(4) : ""}</span>`;
}

// Elapsed and time left of anything running; ticks between polls.
function clock(item) {
  if (item.outcome !== "running") return item.duration_ms != null ? dur(item.duration_ms) : "";
  const start = tms(item.started), deadline = tms(item.deadline);
  let t = `<span class="clock" data-start="${start}">${dur(now() - start)}</span>`;
  if (deadline) {
    t += ` · <span class="clock left" data-deadline="${deadline}">` +
         `${dur(Math.max(0, deadline - now()))} left</span>`;
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
  offset = tms(j.now) - Date.now();
  return j;
}

function stepHtml(s) {
  // A waiting gate counts down in its own box (gateHtml), not on its rows.
  const waiting = s.gate && s.gate.state === "waiting";
  const label = (s.hook ? s.hook + " " : "") + (s.fixer ? "fix " : "") + (s.judge ? "judge " : "") + s.kind + ": " + s.name +
                (s.cell ? " [" + s.cell + "]" : "");
  let h = `<div class="step" data-step="${esc(s.id)}"><div class="row">${badge(stepOutcome(s))}` +
          `<strong>${esc(label)}</strong><span class="muted">line ${s.line}</span>` +
          `<span>${clock(waiting ? {...s, deadline: null} : s)}</span>`;
  h += spend(s);
  if (s.agent) {
    h += `<span class="muted">${s.agent.turns} turns · ${s.agent.provider_requests} requests` +
         `${s.agent.nudge_sent ? " · nudged" : ""}` +
         `${s.agent.fallbacks_taken.length ? " · fell back to " + esc(s.agent.fallbacks_taken.join(", ")) : ""}</span>`;
  }
  h += `</div>`;
  if (s.cached_from) {
    h += `<div class="muted">cached from run ${esc(s.cached_from.run)}, step ${esc(s.cached_from.step)}</div>`;
  }
  if (s.error) h += `<div class="error">${esc(s.error)}</div>`;
  if (s.gate) h += gateHtml(s);
  for (const a of s.attempts) {
    h += `<div class="attempt">(attempt ${a.number}/${a.of}) ${badge(s.cached ? "cached" : a.outcome)} ` +
         `${a.outcome === "running" ? clock(waiting ? {...a, deadline: null} : a) : dur(a.duration_ms)}` +
         `${a.identity ? "  hash: " + esc(a.identity.slice(0, 8)) : ""}` +
         `${a.clipped_to_ms != null ? "  clipped to " + a.clipped_to_ms + "ms" : ""}` +
         `${a.exhausted_by ? "  exhausted by " + esc(a.exhausted_by) : ""}` +
         `${a.fixed ? "  (after fix)" : ""}${a.error ? "  " + esc(a.error) : ""}` +
         `<div class="muted">Taken by: ${esc(a.taken_by)}</div></div>`;
  }
  for (const t of s.turns) {
    h += `<div class="turn">turn ${t.turn}${t.provider_requests > 1 ? " (" + t.provider_requests + " requests)" : ""}: ` +
         esc(t.tool_calls.length ? t.tool_calls.map(callLabel).join("  ") : t.text) + `</div>`;
  }
  // A gate prints nothing: no log box while it waits.
  if (s.log_lines > 0 || (s.outcome === "running" && s.kind !== "gate")) {
    const key = "log:" + s.id;
    // A running step's log is open unless the reader closed it.
    const open = opened.has(key) || (s.outcome === "running" && !closed.has(key));
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

// A gate: what it asks and who may decide; while it waits, a countdown to
// its deadline and the buttons (or, when it names approvers, the command
// they decide it with: the page cannot tell who clicks); once ended, how.
function gateHtml(s) {
  const g = s.gate, who = g.approvers.length ? g.approvers.join(", ") : "anyone";
  let h = `<div class="gate${g.state === "waiting" ? "" : " ended"}" data-gate="${esc(s.id)}">`;
  if (g.message) h += `<div class="gate-message">${esc(g.message)}</div>`;
  if (g.state !== "waiting") {
    const by = g.taken_by ? " by " + g.taken_by : g.decided_by_default ? " by its default on expiry" : "";
    return h + `<div class="row gate-ended">${badge(g.state)}<span>${esc(by)}` +
           `${g.reason ? ": " + esc(g.reason) : ""}</span></div></div>`;
  }
  const deadline = tms(g.deadline);
  h += `<div class="row"><span>${badge("waiting")} for a decision by <strong class="gate-who">` +
       `${esc(who)}</strong></span>` +
       (deadline ? `<span class="clock left gate-left" data-deadline="${deadline}">` +
                   `${dur(Math.max(0, deadline - now()))} left</span>`
                 : `<span class="muted">no deadline</span>`) +
       `<span class="muted">on expiry: ${g.default ? esc(g.default) : "it fails"}</span></div>`;
  const cli = `steps approve ${runId} ${s.id}`;
  if (g.approvers.length) {
    return h + `<div class="gate-cli">Only ${esc(who)} may decide this gate, and this page cannot ` +
           `tell who you are: as one of them, run <code>${esc(cli)}</code> (or <code>steps reject ` +
           `${esc(runId)} ${esc(s.id)} --reason TEXT</code>) in a terminal.</div></div>`;
  }
  if (!token) {
    return h + `<div class="gate-cli gate-no-token">To decide here, open the link <code>steps ui</code> ` +
           `printed (it carries the server's token), or run <code>${esc(cli)}</code> (or ` +
           `<code>steps reject ${esc(runId)} ${esc(s.id)} --reason TEXT</code>) in a terminal.</div></div>`;
  }
  const key = runId + "|" + s.id, note = gateNotes.get(key) || {};
  const off = note.sending ? " disabled" : "";
  h += `<textarea class="gate-reason" data-gate="${esc(s.id)}" maxlength="2000" ` +
       `placeholder="Reason (kept with the decision)"${off}>${esc(drafts.get(key) || "")}</textarea>` +
       `<button class="approve" data-verb="approve" data-gate="${esc(s.id)}"${off}>Approve</button>` +
       `<button class="reject" data-verb="reject" data-gate="${esc(s.id)}"${off}>Reject</button>` +
       `<span class="muted">or in a terminal: <code>${esc(cli)}</code></span>`;
  if (note.error) h += `<div class="error gate-error">${esc(note.error)}</div>`;
  return h + `</div>`;
}

// Sends a decision with the server's token.
async function decide(step, verb) {
  const run = runId, key = run + "|" + step;
  gateNotes.set(key, {sending: true});
  shown = null; refresh();
  let error = null;
  try {
    const r = await fetch(`api/runs/${encodeURIComponent(run)}/gates/${encodeURIComponent(step)}/${verb}`, {
      method: "POST", cache: "no-store",
      headers: {"Content-Type": "application/json", "X-Steps-Token": token},
      body: JSON.stringify({reason: drafts.get(key) || ""})});
    const j = await r.json().catch(() => ({error: r.status + " " + r.statusText}));
    if (!r.ok) error = j.error;
  } catch (e) {
    error = e.message;
  }
  if (error) gateNotes.set(key, {error});
  else { gateNotes.delete(key); drafts.delete(key); }
  shown = null; refresh();
}
document.addEventListener("click", e => {
  const b = e.target.closest && e.target.closest("button[data-verb]");
  if (b && !b.disabled) decide(b.dataset.gate, b.dataset.verb);
});
document.addEventListener("input", e => {
  if (e.target.classList && e.target.classList.contains("gate-reason")) {
    drafts.set(runId + "|" + e.target.dataset.gate, e.target.value);
  }
});

// A tool call as one line: its name and arguments (JSON, or the raw text).
function callLabel(c) {
  const args = typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments);
  return c.name + " " + args + (c.arguments_truncated ? "…" : "");
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

// A step of the plan that has not started: greyed, with what is known.
function plannedHtml(p, runStatus) {
  const label = (p.hook ? p.hook + " " : "") + p.kind + ": " + p.name;
  const st = runStatus === "running" ? "pending" : "not started";
  return `<div class="step planned" data-step="${esc(p.id)}"><div class="row">` +
         `<span class="badge ${st.replace(" ", "-")}">${st}</span><strong>${esc(label)}</strong>` +
         `<span class="muted">line ${p.line}</span>` +
         `${p.timeout_ms != null ? `<span class="muted">timeout ${dur(p.timeout_ms)}</span>` : ""}` +
         `</div></div>`;
}

// The plan entry a stored step belongs to: its id without a re-run
// ("~2"), a fixer ("/fix") or a route's later visit ("#2").
const planId = id => id.replace(/~\d+$/, "").replace(/\/fix$/, "").replace(/#\d+/g, "");

// A job's steps in plan order, each plan entry with the runs of it (none
// yet: {planned}); steps the outline does not name come last.
function ordered(j) {
  const byPlan = new Map();
  for (const s of j.steps) {
    const k = planId(s.id);
    if (!byPlan.has(k)) byPlan.set(k, []);
    byPlan.get(k).push(s);
  }
  const out = [], used = new Set();
  for (const p of j.plan || []) {
    const runs = byPlan.get(p.id);
    if (runs) { out.push(...runs.map(step => ({step}))); used.add(p.id); }
    else out.push({planned: p});
  }
  for (const s of j.steps) if (!used.has(planId(s.id))) out.push({step: s});
  return out;
}

function tabsHtml(r) {
  const id = encodeURIComponent(current);
  return `<nav class="tabs"><a href="#${id}"${view === "steps" ? ' class="on"' : ""}>steps</a>` +
         `<a href="#${id}/timeline"${view === "timeline" ? ' class="on"' : ""}>timeline</a></nav>`;
}

function runHtml(r) {
  let h = tabsHtml(r) +
          `<div class="card"><div class="row">${badge(r.outcome)}<strong>run ${esc(r.id)}</strong>` +
          `<span class="muted">${esc(r.file)}</span><span>${when(tms(r.started))}</span>` +
          `<span>${clock(r)}</span>${spend(r)}<span class="muted">Taken by: ${esc(r.taken_by)}</span></div>` +
          (r.interruptions || []).map(i => `<div class="muted interruption">interrupted ${when(tms(i.died))} ` +
            `(${esc(i.outcome)}), resumed ${when(tms(i.resumed))} by ${esc(i.resumed_by)}</div>`).join("") +
          `</div>`;
  if (view === "timeline") return h + timelineHtml(r);
  for (const j of r.jobs) {
    h += `<div class="card" data-job="${esc(j.name)}"><div class="row">${badge(j.outcome)}` +
         `<strong>job ${esc(j.name)}</strong><span>${clock(j)}</span>${spend(j)}` +
         `<span class="muted execution">execution: [${esc(j.execution.join(", "))}]</span></div>`;
    if (j.error) h += `<div class="error">${esc(j.error)}</div>`;
    for (const e of ordered(j)) h += e.step ? stepHtml(e.step) : plannedHtml(e.planned, r.outcome);
    h += `</div>`;
  }
  return h;
}

// The timeline: one row per step on the run's time axis; per attempt a
// bar, the waits between attempts striped, the deadline a red line, agent
// turns as ticks and the nudge as a mark.
function timelineHtml(r) {
  const t0 = tms(r.started);
  let t1 = r.duration_ms != null ? t0 + r.duration_ms : now();
  for (const j of r.jobs) for (const s of j.steps) {
    const end = s.duration_ms != null ? tms(s.started) + s.duration_ms : now();
    if (end > t1) t1 = end;
  }
  const span = Math.max(t1 - t0, 1);
  const x = ms => Math.min(100, Math.max(0, (ms - t0) / span * 100));
  const pos = (a, b) => `left:${x(a).toFixed(3)}%;width:${Math.max(0, x(b) - x(a)).toFixed(3)}%`;
  let axis = "";
  for (let i = 0; i <= 4; i++) {
    axis += `<span class="tl-tick" style="left:${i * 25}%">${i === 0 ? "0" : dur(Math.round(span * i / 4))}</span>`;
  }
  // Each interruption of a resumed run: a hatched band across every row.
  const down = (r.interruptions || []).map(i =>
    `<div class="tl-down" style="${pos(tms(i.died), tms(i.resumed))}" title="interrupted ` +
    `${esc(when(tms(i.died)))}, resumed ${esc(when(tms(i.resumed)))}"></div>`).join("");
  let h = `<div class="card timeline"><div class="tl-axis"><div class="tl-label"></div>` +
          `<div class="tl-track">${axis}${down}</div></div>`;
  for (const j of r.jobs) {
    h += `<div class="tl-row tl-job"><div class="tl-label"><strong>job ${esc(j.name)}</strong></div>` +
         `<div class="tl-track">${down}${j.started ? `<div class="tl-bar ${esc(j.outcome)}" style="${pos(
           tms(j.started), j.duration_ms != null ? tms(j.started) + j.duration_ms : t1)};opacity:.35"></div>` : ""}</div></div>`;
    for (const e of ordered(j)) {
      const s = e.step, p = e.planned;
      const name = s ? (s.hook ? s.hook + " " : "") + (s.fixer ? "fix " : "") + (s.judge ? "judge " : "") + s.name +
                       (s.cell ? " [" + s.cell + "]" : "")
                     : (p.hook ? p.hook + " " : "") + p.name;
      h += `<div class="tl-row${s ? "" : " planned"}" data-step="${esc(s ? s.id : p.id)}">` +
           `<div class="tl-label" title="${esc(name)}">${esc(name)}</div><div class="tl-track">${down}`;
      if (s) h += stepBars(s, j, pos, x, t1);
      h += `</div></div>`;
    }
  }
  h += `<div class="tl-legend"><span><i class="succeeded"></i>attempt</span>` +
       `<span><i class="tl-wait"></i>retry wait</span><span><i class="tl-deadline"></i>deadline</span>` +
       `<span>│ agent turn</span><span class="tl-nudge" style="position:static">▼</span><span>nudge</span>` +
       (down ? `<span><i class="tl-down" style="position:static"></i>interrupted</span>` : "") + `</div>`;
  return h + `</div>`;
}

function stepBars(s, j, pos, x, t1) {
  const endOf = a => a.duration_ms != null ? tms(a.started) + a.duration_ms : (a.outcome === "running" ? now() : t1);
  let h = "";
  const attempts = s.attempts.length ? s.attempts : [s];
  attempts.forEach((a, i) => {
    const start = tms(a.started);
    if (i > 0) {
      const prev = attempts[i - 1], from = endOf(prev);
      if (start > from) {
        h += `<div class="tl-wait" title="waited ${dur(start - from)} before attempt ${a.number}" ` +
             `style="${pos(from, start)}"></div>`;
      }
    }
    const st = s.cached ? "cached" : a.outcome;
    h += `<div class="tl-bar tl-attempt ${esc(st)}" title="${a.number ? "attempt " + a.number + "/" + a.of + ": " : ""}` +
         `${esc(st)} ${dur(endOf(a) - start)}" style="${pos(start, endOf(a))}"></div>`;
  });
  // The deadline: the step's own, else each attempt's, else its timeout
  // counted from its start.
  // Past the axis, the first one is named at the row's end, counted from
  // the start of what it limits.
  const plan = (j.plan || []).find(p => p.id === planId(s.id));
  let deadlines = s.deadline ? [[tms(s.deadline), tms(s.started)]]
                             : s.attempts.filter(a => a.deadline).map(a => [tms(a.deadline), tms(a.started)]);
  if (!deadlines.length && plan && plan.timeout_ms != null)
    deadlines = [[tms(s.started) + plan.timeout_ms, tms(s.started)]];
  let later = "";
  for (const [d, from] of deadlines) {
    if (x(d) < 100) h += `<div class="tl-deadline" title="deadline ${when(d)}" style="left:${x(d).toFixed(3)}%"></div>`;
    else if (!later) later = `<span class="tl-deadline-later" title="deadline ${when(d)}">deadline +${dur(d - from)} ›</span>`;
  }
  h += later;
  for (const t of s.turns) {
    if (t.at) h += `<div class="tl-turn" title="turn ${t.turn}" style="left:${x(tms(t.at)).toFixed(3)}%"></div>`;
  }
  if (s.nudge_at) h += `<div class="tl-nudge" title="nudge sent" style="left:${x(tms(s.nudge_at)).toFixed(3)}%">▼</div>`;
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
      // A running timeline redraws anyway: its bars grow with the clock.
      if (text === shown && !(view === "timeline" && j.run.outcome === "running")) {
        timer = setTimeout(refresh, j.run.outcome === "running" ? 1000 : 5000);
        return;
      }
      shown = text;
      // Where each log was scrolled, to keep it across the redraw.
      const scrolled = new Map();
      main.querySelectorAll("details.log pre").forEach(p => scrolled.set(
        p.parentElement.dataset.step, p.scrollTop + p.clientHeight >= p.scrollHeight - 4
          ? Infinity : p.scrollTop));
      // The reason being typed keeps its focus and selection.
      const a = document.activeElement, typing = a && a.classList.contains("gate-reason")
        ? {gate: a.dataset.gate, from: a.selectionStart, to: a.selectionEnd} : null;
      main.innerHTML = runHtml(j.run);
      if (typing) {
        const box = main.querySelector(`textarea.gate-reason[data-gate="${CSS.escape(typing.gate)}"]`);
        if (box) { box.focus(); box.setSelectionRange(typing.from, typing.to); }
      }
      main.querySelectorAll("details.log").forEach(d => {
        const pre = d.querySelector("pre"), at = scrolled.get(d.dataset.step);
        pre.scrollTop = at === undefined || at === Infinity ? pre.scrollHeight : at;
        if (d.open) fillLog(d);
      });
      if (j.run.outcome === "running") timer = setTimeout(refresh, 1000);
      else timer = setTimeout(refresh, 5000);
    } else {
      const j = await getJson("api/runs");
      document.getElementById("where").textContent = j.runs.length + " runs";
      main.innerHTML = j.runs.length ? `<div class="card runs">` + j.runs.map(r =>
          `<div class="runrow">${badge(r.outcome)}<a class="run" href="#${esc(r.id)}">${esc(r.id)}</a>` +
          `<span class="file">${esc(r.file)}</span><span>${when(tms(r.started))}</span>` +
          `<span>${clock(r)}</span>${spend(r)}</div>`).join("") +
        `</div>` : `<p class="muted">No runs yet: start one with <code>steps run FILE</code>.</p>`;
      timer = setTimeout(refresh, 2000);
    }
  } catch (e) {
    shown = null;
    main.innerHTML = `<p class="error">${esc(e.message)}</p>`;
    timer = setTimeout(refresh, 2000);
  }
}
function route() {
  let hash = location.hash.slice(1);
  try { hash = decodeURIComponent(hash); } catch (e) { /* shown as typed */ }
  view = hash.endsWith("/timeline") ? "timeline" : "steps";
  current = hash.replace(/\/timeline$/, "") || null;
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
