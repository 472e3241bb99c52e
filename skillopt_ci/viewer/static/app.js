/* skillopt-ci viewer: one front end for the self-contained HTML report and the live viewer.
 *
 * The data is a bundle (skillopt_ci/viewer/bundle.py): embedded in a report as the JSON script
 * element #bundle, or fetched from /api/run?id= in live mode (a page without #bundle). Every
 * string in it comes from models and task files and is untrusted: the DOM is built with
 * createElement/createElementNS and textContent only, never parsed from markup.
 */
"use strict";
(function () {
  const PAGE = 200; // result rows rendered at a time: 5,000 results must stay fast
  const POLL_MS = 1000; // a run in progress is re-fetched this often
  const RUNS_POLL_MS = 3000; // the run list, so that new runs appear
  const TRUNCATED = "[truncated in this report; the whole text is in the run directory]";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const SPLITS = ["train", "val", "test"];
  const GLYPHS = { // drawn inside each chart marker: a decision never depends on colour alone
    baseline: "M-2.5,-2.5h5v5h-5z",
    accepted: "M-3.2,0.2L-1,2.6L3.4,-2.6",
    rejected: "M-2.6,-2.6L2.6,2.6M2.6,-2.6L-2.6,2.6",
    skipped: "M-3.2,0H3.2",
  };
  const NO_FILTERS = { failed: false, regressed: false, flaky: false, split: "", evaluation: "", text: "" };

  const state = {
    live: false, runId: null, generation: 0, timer: null, errors: {},
    bundle: null, signature: null, kindShown: null, evalsById: {}, rows: [], matching: [],
    step: null, trajectory: null, limit: PAGE, diffFrom: null, diffTo: null, diffChosen: false,
    filters: { ...NO_FILTERS }, open: new Set(),
  };

  // ---- DOM helpers: text only, never markup ---------------------------------------------------

  function setProps(node, props) {
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }

  function append(node, children) {
    for (const child of [children].flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function make(node, props, children) {
    setProps(node, props);
    return append(node, children);
  }

  const el = (tag, props, ...children) => make(document.createElement(tag), props, children);
  const svg = (tag, props, ...children) => make(document.createElementNS(SVG_NS, tag), props, children);

  function fill(node, ...children) {
    node.replaceChildren();
    return append(node, children);
  }

  const byId = (id) => document.getElementById(id);

  function onActivate(handler) { // click, Enter or Space: rows and chart points work from the keyboard
    const onkeydown = (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); handler(); }
    };
    return { tabindex: 0, onclick: handler, onkeydown };
  }

  function badge(word, extra) {
    const cls = String(word || "").toLowerCase().replace(/[^a-z]+/g, "-");
    return el("span", { class: "badge " + cls + (extra ? " " + extra : ""), text: word });
  }

  function table(headers, rows, props) {
    const body = rows.map((row) => (row instanceof Node ? row : el("tr", null, row.map((cell) => el("td", null, cell)))));
    return el("table", props, el("thead", null, el("tr", null, headers.map((h) => el("th", { text: h })))),
      el("tbody", null, body));
  }

  function kv(pairs) {
    const rows = pairs.filter((p) => !missing(p[1]) && p[1] !== "")
      .map(([k, v]) => el("tr", null, el("th", { text: k }), el("td", null, v)));
    return el("table", { class: "kv" }, el("tbody", null, rows));
  }

  const snippet = (text) => (text ? el("pre", { class: "snippet", text }) : "—");
  const section = (id, title, ...children) => fill(byId(id), el("h2", { text: title }), children);

  // ---- formatting: the strings of summary.json's reports (Python's format rules) --------------

  function fixed(x, digits) { // format(x, ".Nf"): the exact binary value, ties to even
    const plain = x.toFixed(digits);
    const long = Math.abs(x).toFixed(digits + 25);
    if (long.slice(-25) !== "5" + "0".repeat(24)) return plain;
    let head = long.slice(0, -25);
    if (head.endsWith(".")) head = head.slice(0, -1);
    return Number(head[head.length - 1]) % 2 === 0 ? (x < 0 ? "-" : "") + head : plain;
  }

  function commas(text) {
    const [whole, frac] = text.split(".");
    return whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (frac === undefined ? "" : "." + frac);
  }

  const missing = (v) => v === null || v === undefined;
  const fmt = {
    score: (v) => (missing(v) ? "—" : fixed(v, 3)),
    signed: (v) => (missing(v) ? "—" : (v < 0 || Object.is(v, -0) ? "" : "+") + fixed(v, 3)),
    pct: (v) => (missing(v) ? "—" : fixed(100 * v, 1) + "%"),
    int: (v) => (missing(v) ? "—" : commas(String(Math.round(v)))),
    cost: (v) => (missing(v) ? "unknown" : v < 10 ? "$" + fixed(v, 4) : "$" + commas(fixed(v, 2))),
    secs: (v) => (missing(v) ? "—" : fixed(v, 1) + "s"),
    latency: (v) => (missing(v) ? "—" : fixed(v, 3) + "s"),
    ci: (ci) => (ci ? ` [${fixed(ci[0], 3)}, ${fixed(ci[1], 3)}]` : ""),
    delta: (d, ci) => (missing(d) ? "—" : fmt.signed(d) + (ci ? ` [${fmt.signed(ci[0])}, ${fmt.signed(ci[1])}]` : "")),
    usage: (u) => (u && tokens(u) ? `${fmt.int(u.input_tokens || 0)} in · ${fmt.int(u.output_tokens || 0)} out` : "—"),
  };

  const skillKey = (n) => "v" + String(n).padStart(3, "0");
  const tokens = (u) => (u ? (u.input_tokens || 0) + (u.output_tokens || 0) : 0);
  const asText = (v) => (missing(v) ? "" : typeof v === "string" ? v : JSON.stringify(v, null, 2));
  const isTruncated = (v) => typeof v === "string" && v.endsWith(TRUNCATED);

  function short(value, n) {
    const text = asText(value).replace(/\s+/g, " ").trim();
    return text.length > n ? text.slice(0, n - 1) + "…" : text;
  }

  // ---- the data: rows and their flags, versions, points ---------------------------------------

  function groupBy(items, keyOf) {
    const groups = new Map();
    for (const item of items) {
      const key = keyOf(item);
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(item);
    }
    return groups;
  }

  function bestVersion(bundle) {
    const t = bundle.train;
    if (!t || !t.versions.length) return null;
    const fromSummary = bundle.summary && !missing(bundle.summary.best_version);
    return t.versions[fromSummary ? bundle.summary.best_version : t.incumbent] || t.versions[t.versions.length - 1];
  }

  function buildRows(bundle) {
    const rows = [];
    for (const ev of bundle.evaluations || []) {
      for (const r of ev.results) {
        const key = [ev.id, r.task_id, r.repeat].join("\u0000");
        rows.push({ ev, r, key, failed: r.passed === false, regressed: false, flaky: false });
      }
    }
    for (const group of groupBy(rows, (row) => row.ev.id + "\u0000" + row.r.task_id).values()) {
      const outcomes = new Set(group.map((row) => row.r.passed).filter((p) => p === true || p === false));
      if (outcomes.size > 1) group.forEach((row) => { row.flaky = true; });
    }
    markRegressed(rows, regressionPairs(bundle));
    return rows;
  }

  function regressionPairs(bundle) { // [evaluation before, evaluation after], compared task by task
    if (bundle.kind === "gate") {
      return ((bundle.summary || {}).skills || []).map((s) => [s.name + "/base", s.name + "/head"]);
    }
    const best = bundle.kind === "train" ? bestVersion(bundle) : null;
    if (!best || best.number === 0) return [];
    return [[bundle.train.versions[0].val_dir, best.val_dir],
      ["versions/v000/test", `versions/${skillKey(best.number)}/test`]];
  }

  function markRegressed(rows, pairs) {
    const byEval = groupBy(rows, (row) => row.ev.id);
    const at = (row) => row.r.task_id + "\u0000" + row.r.repeat;
    for (const [beforeId, afterId] of pairs) {
      const before = new Map((byEval.get(beforeId) || []).map((row) => [at(row), row]));
      for (const row of byEval.get(afterId) || []) {
        const old = before.get(at(row));
        if (old && typeof row.r.score === "number" && typeof old.r.score === "number" && row.r.score < old.r.score) {
          row.regressed = true;
          old.regressed = true;
        }
      }
    }
  }

  function chartPoints(train) { // one per step: the baseline, then every history record
    if (!train.versions.length) return [];
    const v0 = train.versions[0].val_mean;
    const base = { step: "baseline", candidate: v0, incumbent: v0, decision: "baseline", reason: "the skill as it was" };
    return [base].concat(train.history.map((r) => ({ step: r.step, candidate: r.candidate_val,
      incumbent: r.incumbent_val, decision: r.decision, reason: r.reason })));
  }

  function candidateText(bundle, step) {
    const key = bundle.train.candidates[step] || (state.evalsById[`steps/${step}/val`] || {}).skill;
    return key ? bundle.skills[key] : undefined;
  }

  // ---- line diff (LCS on the changed middle) --------------------------------------------------

  function lcs(x, y) {
    const n = x.length, m = y.length;
    const t = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) t[i][j] = x[i] === y[j] ? t[i + 1][j + 1] + 1 : Math.max(t[i + 1][j], t[i][j + 1]);
    }
    const out = [];
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (x[i] === y[j]) { out.push({ op: " ", text: x[i] }); i++; j++; }
      else if (t[i + 1][j] >= t[i][j + 1]) out.push({ op: "-", text: x[i++] });
      else out.push({ op: "+", text: y[j++] });
    }
    while (i < n) out.push({ op: "-", text: x[i++] });
    while (j < m) out.push({ op: "+", text: y[j++] });
    return out;
  }

  function diffLines(a, b) {
    const x = a.split("\n"), y = b.split("\n");
    let start = 0;
    while (start < x.length && start < y.length && x[start] === y[start]) start++;
    let ex = x.length, ey = y.length;
    while (ex > start && ey > start && x[ex - 1] === y[ey - 1]) { ex--; ey--; }
    const mx = x.slice(start, ex), my = y.slice(start, ey);
    const middle = mx.length * my.length > 4e6 // too big for a table: all out, all in
      ? mx.map((text) => ({ op: "-", text })).concat(my.map((text) => ({ op: "+", text })))
      : lcs(mx, my);
    const same = (text) => ({ op: " ", text });
    return x.slice(0, start).map(same).concat(middle, x.slice(ex).map(same));
  }

  function diffView(before, after, context = 3) {
    const lines = diffLines(before, after);
    const changed = lines.map((l) => l.op !== " ");
    const added = lines.filter((l) => l.op === "+").length, removed = lines.filter((l) => l.op === "-").length;
    if (!added && !removed) return el("p", { class: "note", text: "The two texts are identical." });
    const near = (i) => changed.slice(Math.max(0, i - context), i + context + 1).some(Boolean);
    const gap = (n) => el("span", { class: "skip", text: `⋯ ${n} unchanged line${n > 1 ? "s" : ""}` });
    const out = [];
    let skipped = 0;
    lines.forEach((line, i) => {
      if (!near(i)) { skipped++; return; }
      if (skipped) out.push(gap(skipped));
      skipped = 0;
      const cls = line.op === "+" ? "add" : line.op === "-" ? "del" : "ctx";
      out.push(el("span", { class: cls, text: line.op + " " + line.text }));
    });
    if (skipped) out.push(gap(skipped));
    return [el("p", { class: "meta", text: `+${added} −${removed} lines` }), el("pre", { class: "diff" }, out)];
  }

  // ---- page frame -----------------------------------------------------------------------------

  function buildShell(live) {
    const header = el("header", { id: "header" }, el("div", { class: "brand", text: "skillopt-ci" }),
      el("h1", { text: live ? "Runs" : "Report" }));
    const error = el("div", { id: "error", role: "alert", hidden: true });
    const main = el("main", { id: "main" }, el("p", { class: "hint", text: live ? "Choose a run." : "" }));
    const runs = live ? el("aside", { id: "runs" }, el("h2", { text: "Runs" }),
      el("p", { id: "runs-root", class: "meta" }), el("ul", { id: "run-list" })) : null;
    fill(document.body, header, error, el("div", { class: "layout" }, runs, main));
  }

  function showError(source, message) {
    if (message) state.errors[source] = message;
    else delete state.errors[source];
    const box = byId("error"), messages = Object.values(state.errors);
    fill(box, messages.map((m) => el("p", { text: m })));
    box.hidden = messages.length === 0;
  }

  function buildSections(kind) {
    const ids = [["summary", "Summary"]];
    if (kind === "train") ids.push(["training", "Steps"], ["versions", "Versions"], ["epochs", "Epochs"]);
    if (kind === "gate") ids.push(["side-by-side", "Base vs head"]);
    ids.push(["results", "Results"]);
    const nav = el("nav", { id: "nav" }, ids.map(([id, label]) =>
      el("button", { type: "button", text: label, onclick: () => byId(id).scrollIntoView() })));
    fill(byId("main"), nav, ids.map(([id]) => el("section", { id })));
    state.kindShown = kind;
  }

  function renderHeader(bundle) {
    const limits = bundle.limits || {};
    const truncated = limits.truncated
      ? ` · ${limits.truncated} long texts cut to ${limits.text_chars} characters (the run directory keeps them whole)` : "";
    fill(byId("header"), el("div", { class: "brand", text: "skillopt-ci" }), el("h1", { id: "title", text: bundle.title }),
      el("p", { class: "meta" }, badge(bundle.kind, "kind"), " ", el("span", { id: "source", text: bundle.source }),
        ` · generated ${bundle.generated_at}${truncated}`),
      liveBlock(bundle));
    document.title = "skillopt-ci · " + bundle.title;
  }

  function liveBlock(bundle) {
    const live = bundle.live || {};
    if (!state.live && !live.in_progress) return null;
    const stopped = !live.in_progress && live.phase !== "done" && bundle.train && bundle.train.stopped;
    const status = live.in_progress ? (state.live ? "in progress" : "snapshot of a run in progress")
      : stopped ? "stopped" : "done";
    const unit = { train: "steps", eval: "results" }[bundle.kind];
    const count = live.total ? `${live.done} / ${live.total} ${unit}` : `${live.done || 0} ${unit}`;
    const latest = live.latest;
    const cls = "badge " + (live.in_progress ? "in-progress" : stopped ? "stopped" : "done");
    return el("div", { id: "live" }, el("span", { id: "live-status", class: cls, text: status }),
      unit ? el("span", { id: "live-step", text: count }) : null,
      el("span", { id: "live-phase", class: "meta", text: "phase: " + (live.phase || "—") }),
      latest ? el("span", { id: "live-current", text: "latest step: " + latest.step }) : null,
      latest ? el("span", { id: "live-decision" }, badge(latest.decision), " ", latest.reason) : null,
      stopped ? el("span", { class: "note", text: stopped }) : null);
  }

  // ---- one run: render everything from the bundle, keeping the user's choices ----------------

  function signatureOf(bundle) {
    const history = (bundle.train || {}).history || [];
    const evals = (bundle.evaluations || []).map((e) => [e.id, e.results.length, e.summary ? 1 : 0]);
    return JSON.stringify([bundle.live, bundle.summary ? 1 : 0, history.length, evals]);
  }

  function showRun(bundle) {
    try {
      const signature = signatureOf(bundle);
      if (state.bundle && signature === state.signature && state.kindShown === bundle.kind) return;
      Object.assign(state, { bundle, signature });
      state.evalsById = Object.fromEntries((bundle.evaluations || []).map((e) => [e.id, e]));
      state.rows = buildRows(bundle);
      if (state.kindShown !== bundle.kind || !byId("summary")) buildSections(bundle.kind);
      renderHeader(bundle);
      renderSummary(bundle);
      if (bundle.kind === "train" && bundle.train) {
        renderTraining(bundle);
        renderVersions(bundle);
        renderEpochs(bundle);
      }
      if (bundle.kind === "gate") renderSideBySide(bundle);
      renderResults(bundle);
      showError("render", null);
    } catch (err) {
      showError("render", "Could not show this run: " + err.message);
    }
  }

  // ---- summary --------------------------------------------------------------------------------

  function renderSummary(bundle) {
    const render = { eval: evalSummary, gate: gateSummary, train: trainSummary }[bundle.kind];
    section("summary", "Summary", render(bundle)).setAttribute("data-ready", "1");
  }

  function evalSummary(bundle) {
    const s = bundle.summary;
    if (!s) return el("p", { class: "note", text: `No summary yet: the evaluation is running (${state.rows.length} results).` });
    const allTokens = s.input_tokens + s.output_tokens + s.scorer_input_tokens + s.scorer_output_tokens;
    const row = [s.skill.name, s.split + (s.shard ? ` (shard ${s.shard})` : ""),
      s.n_tasks_scored !== s.n_tasks ? `${s.n_tasks_scored}/${s.n_tasks}` : String(s.n_tasks),
      fmt.score(s.mean) + fmt.ci(s.ci95), fmt.pct(s.pass_rate), String(s.n_errors), fmt.int(allTokens),
      fmt.cost(s.cost_usd), fmt.secs(s.wall_time_s)];
    const headers = ["skill", "split", "tasks", "score (95% CI)", "pass rate", "errors", "tokens", "cost", "time"];
    const c = s.consulted;  // agent environments: how often the agent read the skill
    if (c) {
      headers.splice(5, 0, "skill used");
      row.splice(5, 0, fraction(c.consulted, c.rollouts));
    }
    const errors = Object.entries(s.errors_by_kind || {}).map(([k, n]) => `${k} ${n}`).join(", ");
    const about = `model ${s.model.provider} / ${s.model.model} · repeats ${s.repeats} · skill ${s.skill.hash.slice(0, 12)}`
      + ` (${s.skill.tokens} tokens) · suite ${s.suite.hash.slice(0, 12)} · cache hits ${s.cache_hits}/${s.n_results}`;
    return [
      table(headers, [row], { id: "score-table" }),
      el("p", { class: "meta", text: about }),
      s.complete ? null : el("p", { class: "error-text", text: `Incomplete run: ${s.stopped || "stopped early"}.` }),
      errors ? el("p", { class: "note", text: `Errored rollouts are missing data, left out of the score: ${errors}.` }) : null,
    ];
  }

  function fraction(hits, of) { // "5/6 (83%)", as the terminal table and the gate comment say it
    return of ? `${hits}/${of} (${fixed(100 * hits / of, 0)}%)` : "—";
  }

  function triggerNotes(s) { // the gate comment's "skill used" and "triggering" lines of one skill
    const notes = [];
    const used = [["base", s.base], ["head", s.head]].filter(([, x]) => x && x.consulted);
    if (used.length) {
      notes.push("skill used: " + used.map(([side, x]) => `${side} ${fraction(x.consulted.consulted, x.consulted.rollouts)}`).join(" → "));
    }
    const head = s.head && s.head.trigger, base = s.base && s.base.trigger;
    if (head) {
      const rates = (t) => ({ recall: [t.tp || 0, (t.tp || 0) + (t.fn || 0)], precision: [t.tp || 0, (t.tp || 0) + (t.fp || 0)] });
      const parts = ["recall", "precision"].map((name) => name + " "
        + (base ? fraction(...rates(base)[name]) + " → " : "") + fraction(...rates(head)[name]));
      notes.push("triggering: " + parts.join("; "));
    }
    return notes;
  }

  function gateSpend(skills) {
    return ["base", "head"].map((side) => [side, skills.map((s) => s[side]).filter(Boolean)])
      .filter(([, list]) => list.length)
      .map(([side, list]) => {
        const used = list.reduce((n, x) => n + x.input_tokens + x.output_tokens + x.scorer_input_tokens + x.scorer_output_tokens, 0);
        const costs = list.map((x) => x.spent_usd);
        return [side, fmt.int(used), fmt.cost(costs.some(missing) ? null : costs.reduce((a, b) => a + b, 0))];
      });
  }

  function gateSummary(bundle) {
    const g = bundle.summary || {}, skills = g.skills || [];
    const rows = skills.map((s) => {
      const c = s.comparison;
      return [s.name, fmt.score(c ? c.base_mean : s.base && s.base.mean), fmt.score(c ? c.head_mean : s.head && s.head.mean),
        c ? fmt.delta(c.delta, c.ci) : "—", c ? String(c.improved) : "—", c ? String(c.regressed) : "—",
        [badge(s.verdict), s.failed ? (g.overridden ? " allowed by label" : " fails the check") : ""]];
    });
    const spend = gateSpend(skills);
    const sha = (s) => (s || "").slice(0, 10);
    return [
      el("p", null, badge(g.verdict || "—"), ` ${g.base_ref} (${sha(g.base_sha)}) → ${g.head_ref} (${sha(g.head_sha)})`),
      table(["skill", "base", "head", "Δ (95% CI)", "improved", "regressed", "verdict"], rows, { id: "gate-table" }),
      el("ul", null, skills.map((s) => el("li", null, el("b", { text: s.name }), ": " + s.reason))),
      el("ul", { id: "gate-triggering" }, skills.flatMap((s) => triggerNotes(s).map((line) =>
        el("li", null, el("b", { text: s.name }), " " + line)))),
      spend.length ? table(["side", "tokens", "spent"], spend, { id: "gate-spend" }) : null,
    ];
  }

  function stageSpend(history) {
    const stages = {};
    for (const r of history) {
      for (const [stage, s] of Object.entries(r.spend || {})) {
        const total = stages[stage] || (stages[stage] = { input_tokens: 0, output_tokens: 0, cost_usd: 0 });
        total.input_tokens += s.input_tokens;
        total.output_tokens += s.output_tokens;
        total.cost_usd = missing(total.cost_usd) || missing(s.cost_usd) ? null : total.cost_usd + s.cost_usd;
      }
    }
    return stages;
  }

  function spendTable(stages, spent) {
    const row = (name, x) => [name, fmt.int(x.input_tokens), fmt.int(x.output_tokens),
      fmt.int((x.input_tokens || 0) + (x.output_tokens || 0)), fmt.cost(x.cost_usd)];
    const rows = Object.entries(stages).map(([stage, x]) => row(stage, x));
    rows.push(row(el("b", { text: "total (run)" }), spent));
    return table(["stage", "input tokens", "output tokens", "tokens", "cost"], rows, { id: "spend-table" });
  }

  function bestSoFar(bundle) { // summary.json's curve, or (a run in progress) the same from its step records
    const s = bundle.summary, t = bundle.train;
    if (s && s.best_so_far && s.best_so_far.length) return s.best_so_far;
    let calls = t.baseline_calls || 0; // what the baseline's validation took, as train.call_plan.best_so_far counts
    const points = [{ step: "baseline", calls, version: 0, val: t.versions[0].val_mean }];
    for (const r of t.history) {
      for (const spend of Object.values(r.spend || {})) calls += spend.target_calls || 0;
      points.push({ step: r.step, calls, version: r.incumbent_version_after, val: r.incumbent_val });
    }
    return points;
  }

  function curveTable(bundle) { // the baseline, every change of the best skill, and the last step
    const points = bestSoFar(bundle), budget = (bundle.summary || {}).max_target_calls;
    if (points.length < 2) return null;
    const shown = points.filter((p, i) => i === 0 || i === points.length - 1 || p.version !== points[i - 1].version);
    const counted = points.some((p) => p.calls);
    return el("div", { class: "curve-box" }, el("h3", { text: "Best so far" + (counted ? " by target calls" : " by step")
      + (missing(budget) ? "" : ` (of ${fmt.int(budget)})`) }),
    table(["after", "target calls", "best version", "val"],
      shown.map((p) => [p.step, counted ? fmt.int(p.calls) : "—", skillKey(p.version), fmt.score(p.val)]),
      { id: "best-so-far" }));
  }

  function trainSummary(bundle) {
    const t = bundle.train, live = bundle.live || {};
    const s = bundle.summary && !live.in_progress ? bundle.summary : null; // a resumed run's old summary is stale
    if (!t || !t.versions.length) return el("p", { class: "note", text: "Scoring the baseline on validation…" });
    const best = bestVersion(bundle);
    const testMean = (n) => ((state.evalsById[`versions/${skillKey(n)}/test`] || {}).summary || {}).mean;
    const splitRow = (c, name) => (c ? [name, fmt.score(c.current), fmt.score(c.trained), fmt.delta(c.delta, c.ci),
      badge(c.verdict)] : [name, "—", "—", "—", "not measured"]);
    const counts = s ? { accepted: s.steps_accepted, rejected: s.steps_rejected, skipped: s.steps_skipped }
      : Object.fromEntries(["accepted", "rejected", "skipped"].map((d) => [d, t.history.filter((r) => r.decision === d).length]));
    const sofar = t.spent || {};
    const spent = s ? { input_tokens: s.input_tokens, output_tokens: s.output_tokens, cost_usd: s.cost_usd,
      wall_time_s: s.wall_time_s } : { ...sofar, cost_usd: sofar.cost_known === false ? null : sofar.cost_usd };
    const verdict = s ? el("p", null, badge(s.improved ? "improved" : "unchanged"),
      s.improved ? " the trained skill beats the current one" : " no improvement to propose")
      : el("p", { class: "note", text: "Run in progress: current vs trained on val and test comes at the end." });
    return [verdict,
      s && !s.complete ? el("p", { class: "error-text", text: `Stopped early: ${s.stopped || "stopped"}. `
        + "Re-run the same command to resume." }) : null,
      s && s.complete && s.stopped ? el("p", { id: "planned-stop", class: "note",
        text: `Steps stopped early, then the best skill was tested: ${s.stopped}` }) : null,
      s ? table(["split", "current", "trained", "Δ (95% CI)", "verdict"], [splitRow(s.val, "val"), splitRow(s.test, "test")],
        { id: "split-table" }) : null,
      table(["", "version", "val", "test"], [
        ["baseline", "v000", fmt.score(t.versions[0].val_mean), fmt.score(s && s.test ? s.test.current : testMean(0))],
        [s ? "best = final" : "best so far", skillKey(best.number), fmt.score(best.val_mean),
          fmt.score(s && s.test ? s.test.trained : testMean(best.number))],
      ], { id: "versions-table" }),
      el("p", { id: "step-counts" }, "Steps: ", badge("accepted"), ` ${counts.accepted} · `, badge("rejected"),
        ` ${counts.rejected} · `, badge("skipped"), ` ${counts.skipped} · wall time ${fmt.secs(spent.wall_time_s)}`
        + (best.number ? "" : " · the best skill is still the baseline")),
      spendTable(s ? s.tokens_by_stage || {} : stageSpend(t.history), spent),
      curveTable(bundle),
    ];
  }

  // ---- training: chart, steps, step detail ----------------------------------------------------

  function stepRow(r) {
    const applied = (r.applied || []).filter((o) => o.status === "applied").length;
    const num = (text) => el("td", { class: "num", text });
    return el("tr", { class: "clickable" + (state.step === r.step ? " selected" : ""), "data-step": r.step,
      ...onActivate(() => selectStep(r.step)) },
    el("td", { text: r.step }), el("td", { text: r.kind }), el("td", { text: r.epoch }), el("td", null, badge(r.decision)),
    num(fmt.score(r.candidate_val)), num(fmt.score(r.incumbent_val)), num(fmt.signed(r.delta)), num(applied),
    el("td", { class: "reason", text: r.reason }));
  }

  function renderTraining(bundle) {
    const scroll = ["steps-wrap", "step-detail"].map((id) => (byId(id) ? byId(id).scrollTop : 0));
    const steps = table(["step", "kind", "epoch", "decision", "candidate val", "incumbent val", "Δ", "edits applied",
      "reason"], bundle.train.history.map(stepRow), { id: "steps" });
    section("training", "Validation per step", el("div", { class: "training-layout" },
      el("div", null, el("div", { class: "chart-box" }, renderChart(bundle.train), legend()),
        el("div", { class: "table-wrap", id: "steps-wrap" }, steps)),
      el("div", { id: "step-detail", class: "card" })));
    renderStepDetail(bundle);
    ["steps-wrap", "step-detail"].forEach((id, i) => { byId(id).scrollTop = scroll[i]; });
  }

  function pointTitle(p) {
    const candidate = !missing(p.candidate) ? fixed(p.candidate, 3)
      : p.decision === "skipped" ? "none (nothing applied)" : "not fully scored (rejected early)";
    return `${p.step} · ${p.decision}\ncandidate: ${candidate}\nincumbent after: ${fmt.score(p.incumbent)}\n${p.reason || ""}`;
  }

  function renderChart(train) {
    const points = chartPoints(train), n = points.length;
    const H = 290, L = 56, R = 16, T = 14, B = 70;
    const W = Math.max(760, L + R + 9 * n), pw = W - L - R, ph = H - T - B; // dense runs scroll sideways
    const r = Math.max(3.5, Math.min(7, pw / n / 2.2)); // markers never hide each other
    const x = (i) => L + (n < 2 ? pw / 2 : (i * pw) / (n - 1));
    const y = (v) => T + (1 - Math.max(0, Math.min(1, v))) * ph;
    const chart = svg("svg", { id: "val-chart", class: W > 760 ? "wide" : null, width: W, height: H,
      viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "validation score per step" },
    svg("title", { text: "Validation score per step (line: the incumbent; markers: each step's decision)" }));
    for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
      append(chart, [svg("line", { class: "grid", x1: L, x2: W - R, y1: y(tick), y2: y(tick) }),
        svg("text", { x: L - 6, y: y(tick) + 4, "text-anchor": "end", text: tick.toFixed(2) })]);
    }
    append(chart, [svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: T + ph }),
      svg("text", { x: 12, y: T + ph / 2, transform: `rotate(-90 12 ${T + ph / 2})`, "text-anchor": "middle",
        text: "validation score" })]);
    const line = points.map((p, i) => (missing(p.incumbent) ? null : `${x(i)},${y(p.incumbent)}`)).filter(Boolean);
    append(chart, svg("polyline", { class: "incumbent-line", points: line.join(" ") }));
    const every = Math.max(1, Math.ceil((16 * (n - 1)) / pw)); // x labels at least 16px apart
    points.forEach((p, i) => {
      const cx = x(i), cy = y(missing(p.candidate) ? (missing(p.incumbent) ? 0 : p.incumbent) : p.candidate);
      if (i % every === 0 || i === n - 1) {
        const ly = T + ph + 14;
        append(chart, svg("text", { x: cx, y: ly, "text-anchor": "end", transform: `rotate(-40 ${cx} ${ly})`, text: p.step }));
      }
      const cls = `point ${p.decision}` + (missing(p.candidate) ? " unmeasured" : "") + (state.step === p.step ? " selected" : "");
      append(chart, [svg("circle", { class: cls, cx, cy, r, "data-step": p.step, "data-decision": p.decision,
        ...onActivate(() => selectStep(p.step)) }, svg("title", { text: pointTitle(p) })),
      svg("path", { class: "glyph", d: GLYPHS[p.decision] || "", transform: `translate(${cx} ${cy}) scale(${r / 7})` })]);
    });
    return chart;
  }

  function legend() {
    const item = (decision, label) => el("span", null, svg("svg", { width: 16, height: 16, viewBox: "-8 -8 16 16",
      "aria-hidden": "true" }, svg("circle", { class: "swatch " + decision, r: 7 }),
    svg("path", { class: "glyph", d: GLYPHS[decision] })), label);
    return el("div", { class: "legend" }, item("baseline", "baseline"), item("accepted", "accepted ✓"),
      item("rejected", "rejected ✗"), item("skipped", "skipped –"),
      el("span", { text: "— incumbent score · faded marker: candidate not fully scored" }));
  }

  function selectStep(step) {
    state.step = step;
    for (const node of document.querySelectorAll("#val-chart .point, #steps tr[data-step]")) {
      node.classList.toggle("selected", node.getAttribute("data-step") === step);
    }
    renderStepDetail(state.bundle);
    byId("step-detail").scrollIntoView({ block: "nearest" });
  }

  function renderStepDetail(bundle) {
    const box = byId("step-detail");
    const record = bundle.train.history.find((r) => r.step === state.step);
    if (state.step === "baseline") {
      return fill(box, el("h3", null, "Baseline ", badge("baseline")),
        kv([["version", "v000"], ["validation", fmt.score(bundle.train.versions[0].val_mean)]]),
        el("details", null, el("summary", { text: "skill text" }), el("pre", { text: bundle.skills.v000 || "" })));
    }
    if (!record) return fill(box, el("p", { class: "hint", text: "Click a point of the chart or a row of the table." }));
    const early = (record.stats || {}).early_stopped ? "yes: scoring stopped once the candidate could not win" : null;
    const edits = (title, list) => (list ? [el("h4", { text: `${title} (${list.length})` }), editsTable(list)] : null);
    fill(box, el("h3", null, `Step ${record.step} `, badge(record.decision)),
      el("p", { class: "reason", text: record.reason }),
      kv([["kind", record.kind], ["epoch", String(record.epoch)], ["incumbent", skillKey(record.incumbent_version)],
        ["candidate val", fmt.score(record.candidate_val)], ["incumbent val after", fmt.score(record.incumbent_val)],
        ["Δ (95% CI)", missing(record.delta) ? null : fmt.delta(record.delta, record.ci)],
        ["edit budget", missing(record.edit_budget) ? null : String(record.edit_budget)],
        ["accepted as", missing(record.candidate_version) ? null : skillKey(record.candidate_version)],
        ["early rejection", early]]),
      el("h4", { text: `Diff: ${skillKey(record.incumbent_version)} → candidate` }), stepDiff(bundle, record),
      record.rollout ? rolloutBlock(record) : null,
      record.categories ? categoriesBlock(record.categories) : null,
      record.analysis ? [el("h4", { text: "Analysis" }), el("p", { class: "analysis", text: record.analysis })] : null,
      record.proposals ? proposalsBlock(record.proposals) : null,
      edits("Merged edits", record.merged), edits("Selected edits", record.selected),
      record.applied ? applyBlock(record.applied) : null,
      spendBlock(record.spend));
  }

  function stepDiff(bundle, record) {
    const after = candidateText(bundle, record.step);
    if (after !== undefined) return diffView(bundle.skills[skillKey(record.incumbent_version)] || "", after);
    return el("p", { class: "note", text: record.decision === "skipped"
      ? "No candidate: no edit was applied in this step." : "The candidate's text is not in the run directory." });
  }

  function rolloutBlock(record) {
    const failures = record.rollout.failures || [];
    const text = `${(record.batch || []).length} train tasks, mean ${fmt.score(record.rollout.mean)}; `
      + `${failures.length} failed` + (failures.length ? ": " + failures.join(", ") : "");
    return [el("h4", { text: "Rollout" }), el("p", { text })];
  }

  function categoriesBlock(categories) {
    const rows = Object.entries(categories).map(([name, items]) => [name.replace(/_/g, " "), String(items.length),
      items.map((c) => c.task_id).join(", ")]);
    return [el("h4", { text: "Previous epoch's skill vs current, on the same train tasks" }),
      table(["", "tasks", "ids"], rows)];
  }

  function proposalsBlock(proposals) {
    const group = (p) => el("div", { class: "proposal" },
      el("p", null, badge(p.kind), ` group ${p.group} · ${(p.task_ids || []).length} tasks · ${(p.edits || []).length} edits`
        + (p.attempts > 1 ? ` · ${p.attempts} attempts` : "")),
      p.analysis ? el("p", { class: "analysis", text: p.analysis }) : null,
      p.error ? el("p", { class: "error-text", text: "error: " + p.error }) : null,
      p.edits && p.edits.length ? editsTable(p.edits) : null);
    return [el("h4", { text: `Proposals (${proposals.length} reflection groups)` }), proposals.map(group)];
  }

  function editsTable(edits) {
    if (!edits.length) return el("p", { class: "hint", text: "none" });
    return table(["op", "text", "anchor", "rationale", "support", "source"], edits.map((e) => [e.op, snippet(e.text),
      snippet(e.anchor), e.rationale || "—", String(e.support), e.source || ""]), { class: "edits" });
  }

  function applyBlock(applied) {
    const rows = applied.map((o) => [badge(o.status), o.edit.op, snippet(o.edit.text || o.edit.anchor), o.detail || ""]);
    return [el("h4", { text: "Apply report" }), table(["status", "op", "edit", "detail"], rows, { class: "edits apply-report" })];
  }

  function spendBlock(spend) {
    if (!spend) return null;
    const rows = Object.entries(spend).map(([stage, s]) => [stage, fmt.int(s.input_tokens), fmt.int(s.output_tokens),
      fmt.cost(s.cost_usd)]);
    return [el("h4", { text: "Spend per stage" }), table(["stage", "input tokens", "output tokens", "cost"], rows)];
  }

  // ---- versions and epochs --------------------------------------------------------------------

  function versionSelect(id, keys, value, onchange) {
    return el("select", { id, onchange: (event) => onchange(event.target.value) },
      keys.map((k) => el("option", { value: k, selected: k === value, text: k })));
  }

  function renderVersions(bundle) {
    const t = bundle.train, best = bestVersion(bundle);
    const keys = t.versions.map((v) => skillKey(v.number)).filter((k) => k in bundle.skills);
    if (!keys.includes(state.diffFrom)) state.diffFrom = keys[0];
    if (!state.diffChosen || !keys.includes(state.diffTo)) state.diffTo = best ? skillKey(best.number) : keys[keys.length - 1];
    const rows = t.versions.map((v) => [skillKey(v.number), v.step, missing(v.parent) ? "—" : skillKey(v.parent),
      fmt.score(v.val_mean), el("code", { text: v.hash.slice(0, 12) }), best && v.number === best.number ? badge("best") : ""]);
    const choose = (side) => (value) => {
      Object.assign(state, { [side]: value, diffChosen: true });
      updateVersionDiff(bundle);
    };
    section("versions", "Skill versions",
      table(["version", "from step", "parent", "val", "hash", ""], rows, { id: "version-table", class: "timeline" }),
      el("div", { class: "controls" },
        el("label", null, "diff from ", versionSelect("diff-from", keys, state.diffFrom, choose("diffFrom"))),
        el("label", null, "to ", versionSelect("diff-to", keys, state.diffTo, choose("diffTo")))),
      el("div", { id: "version-diff" }));
    updateVersionDiff(bundle);
  }

  function updateVersionDiff(bundle) {
    const from = bundle.skills[state.diffFrom], to = bundle.skills[state.diffTo];
    if (from === undefined || to === undefined) return fill(byId("version-diff"), el("p", { class: "hint", text: "No versions yet." }));
    fill(byId("version-diff"), diffView(from, to),
      el("details", null, el("summary", { text: `full text of ${state.diffTo}` }), el("pre", { text: to })));
  }

  function renderEpochs(bundle) {
    const epochs = bundle.train.epochs || [];
    section("epochs", "Epochs: slow update and meta skill",
      epochs.length ? epochs.map(epochCard) : el("p", { class: "hint", text: "No epoch has finished yet." }));
  }

  function epochCard(info) {
    const slow = info.slow_update, meta = info.meta_skill;
    const slowBlock = slow ? [
      el("p", null, badge(slow.decision), " ", slow.reason, " · ",
        el("button", { type: "button", class: "link", text: "show step " + slow.step, onclick: () => selectStep(slow.step) })),
      slow.analysis ? el("p", { class: "analysis", text: slow.analysis }) : null,
      slow.categories ? categoriesBlock(slow.categories) : null, slow.applied ? applyBlock(slow.applied) : null,
    ] : el("p", { class: "hint", text: "No slow update: the skill did not change during this epoch, or slow updates are off." });
    const metaBlock = meta ? [meta.error ? el("p", { class: "error-text", text: "update failed: " + meta.error }) : null,
      el("pre", { class: "meta-skill", text: meta.text || "(empty)" })]
      : el("p", { class: "hint", text: "Not updated after this epoch." });
    return el("div", { class: "card epoch", "data-epoch": info.epoch }, el("h3", { text: `Epoch ${info.epoch}` }),
      el("h4", { text: "Slow update (the protected durable block)" }), slowBlock,
      el("h4", { text: "Meta skill — the optimizer's memory, not part of the skill" }), metaBlock);
  }

  // ---- gate: base vs head per task ------------------------------------------------------------

  function renderSideBySide(bundle) {
    section("side-by-side", "Base vs head, per task", ((bundle.summary || {}).skills || []).map((s) => sideBySide(bundle, s)));
  }

  function pairUp(base, head) {
    const pairs = new Map();
    for (const [side, ev] of [["base", base], ["head", head]]) {
      for (const r of ev ? ev.results : []) {
        const key = r.task_id + "\u0000" + r.repeat;
        if (!pairs.has(key)) pairs.set(key, { task: r.task_id, repeat: r.repeat });
        pairs.get(key)[side] = r;
      }
    }
    const scored = (r) => r && typeof r.score === "number";
    for (const p of pairs.values()) p.delta = scored(p.base) && scored(p.head) ? p.head.score - p.base.score : null;
    return [...pairs.values()].sort((a, b) => (a.delta ?? 0) - (b.delta ?? 0) || String(a.task).localeCompare(String(b.task)));
  }

  function sideBySide(bundle, skill) {
    const base = state.evalsById[skill.name + "/base"], head = state.evalsById[skill.name + "/head"];
    const pairs = pairUp(base, head);
    const output = (r) => snippet(r ? asText(r.output) || "(no output)" : "(not run)");
    const rows = pairs.slice(0, 500).map((p) => {
      const [ev, r] = p.head ? [head, p.head] : [base, p.base];
      const open = () => openTrajectory(state.rows.find((row) => row.ev === ev && row.r === r));
      return el("tr", { class: "clickable" + (p.delta < 0 ? " worse" : p.delta > 0 ? " better" : ""), "data-task": p.task,
        ...onActivate(open) },
      el("td", { text: p.task }), el("td", { text: p.repeat }),
      el("td", { class: "base-output" }, output(p.base)), el("td", { class: "num", text: fmt.score((p.base || {}).score) }),
      el("td", { class: "head-output" }, output(p.head)), el("td", { class: "num", text: fmt.score((p.head || {}).score) }),
      el("td", { class: "num delta", text: fmt.signed(p.delta) }));
    });
    const baseText = base && bundle.skills[base.skill], headText = head && bundle.skills[head.skill];
    const skillDiff = baseText !== undefined && headText !== undefined
      ? el("details", null, el("summary", { text: "skill diff (base → head)" }), diffView(baseText || "", headText || "")) : null;
    return el("div", { class: "skill-compare", "data-skill": skill.name }, el("h3", null, skill.name + " ", badge(skill.verdict)),
      el("p", { class: "reason", text: skill.reason }), skillDiff,
      table(["task", "repeat", "base output", "base", "head output", "head", "Δ"], rows, { class: "side-by-side" }),
      pairs.length > 500 ? el("p", { class: "note", text: `${pairs.length - 500} more pairs: see the results below.` }) : null);
  }

  // ---- results and trajectory -----------------------------------------------------------------

  function checkbox(id, label, checked, onchange, disabled, title) {
    return el("label", { class: disabled ? "disabled" : null, title },
      el("input", { type: "checkbox", id, checked, disabled, onchange: (event) => onchange(event.target.checked) }), " " + label);
  }

  function pick(id, label, options, value, onchange) {
    return el("label", null, label + " ", el("select", { id, onchange: (event) => onchange(event.target.value) },
      options.map(([v, text]) => el("option", { value: v, selected: v === value, text }))));
  }

  function filterControls(bundle) {
    const f = state.filters, evals = bundle.evaluations || [];
    const set = (key) => (value) => { f[key] = value; refreshResults(); };
    const regressedTitle = { gate: "head scored below base on the same task and repeat",
      train: "the best version scored below the baseline on the same task (val and test)" }[bundle.kind];
    return el("div", { class: "filters" },
      checkbox("filter-failed", "failed only", f.failed, set("failed")),
      checkbox("filter-regressed", "regressed only", f.regressed, set("regressed"), !regressedTitle,
        regressedTitle || "an evaluation has nothing to compare with"),
      checkbox("filter-flaky", "flaky", f.flaky, set("flaky"), false, "repeats of a task in the same evaluation disagree"),
      pick("filter-split", "split", [["", "all"], ...SPLITS.map((s) => [s, s])], f.split, set("split")),
      pick("filter-eval", "evaluation", [["", "all evaluations"], ...evals.map((e) => [e.id, `${e.label} (${e.results.length})`])],
        f.evaluation, set("evaluation")),
      el("input", { id: "filter-text", type: "search", placeholder: "task id", value: f.text,
        oninput: (event) => set("text")(event.target.value.trim().toLowerCase()) }),
      el("span", { id: "result-count" }));
  }

  function renderResults(bundle) {
    const f = state.filters;
    if (bundle.kind === "eval") f.regressed = false;
    if (f.evaluation && !state.evalsById[f.evaluation]) f.evaluation = "";
    const scroll = byId("results-wrap") ? byId("results-wrap").scrollTop : 0;
    section("results", "Task results", filterControls(bundle), el("div", { class: "results-layout" },
      el("div", { class: "table-wrap", id: "results-wrap" }), el("div", { id: "trajectory", class: "card" })));
    refreshResults(true);
    byId("results-wrap").scrollTop = scroll;
    renderTrajectory();
  }

  function matches(row, f) {
    return (!f.failed || row.failed) && (!f.regressed || row.regressed) && (!f.flaky || row.flaky)
      && (!f.split || row.ev.split === f.split) && (!f.evaluation || row.ev.id === f.evaluation)
      && (!f.text || String(row.r.task_id).toLowerCase().includes(f.text));
  }

  function refreshResults(keepLimit) {
    if (!keepLimit) state.limit = PAGE;
    state.matching = state.rows.filter((row) => matches(row, state.filters));
    const count = byId("result-count");
    count.setAttribute("data-count", String(state.matching.length));
    count.textContent = `${state.matching.length} of ${state.rows.length} results`;
    const head = ["evaluation", "split", "task", "rep", "score", "passed", "output", "feedback", "tokens", "latency", "flags"];
    fill(byId("results-wrap"), el("table", { id: "results-table", class: "results" },
      el("thead", null, el("tr", null, head.map((h) => el("th", { text: h })))),
      el("tbody", null, state.matching.slice(0, state.limit).map(resultRow))), moreButton());
  }

  function moreButton() {
    const left = state.matching.length - state.limit;
    if (left <= 0) return null;
    return el("button", { id: "show-more", type: "button", text: `show ${Math.min(PAGE, left)} more (${left} not shown)`,
      onclick: showMore });
  }

  function showMore() {
    append(document.querySelector("#results-table tbody"), state.matching.slice(state.limit, state.limit + PAGE).map(resultRow));
    state.limit += PAGE;
    const old = byId("show-more"), next = moreButton();
    if (next) old.replaceWith(next);
    else old.remove();
  }

  function verdictOf(r) {
    if (r.error) return ["error", "error"];
    return r.passed === true ? ["pass", "✓ pass"] : r.passed === false ? ["fail", "✗ fail"] : ["unscored", "—"];
  }

  function resultRow(row) {
    const r = row.r;
    const flags = [row.regressed && "regressed", row.flaky && "flaky", r.cached && "cached", r.error && r.error.kind];
    const cls = "clickable" + (row.failed ? " failed" : "") + (r.error ? " errored" : "")
      + (state.trajectory === row.key ? " selected" : "");
    const node = el("tr", { class: cls, ...onActivate(() => openTrajectory(row)) },
      el("td", { text: row.ev.label }), el("td", { text: row.ev.split || "" }), el("td", { class: "task", text: r.task_id }),
      el("td", { class: "num", text: r.repeat }), el("td", { class: "num", text: fmt.score(r.score) }),
      el("td", { class: "passed", text: verdictOf(r)[1] }), el("td", { class: "output", text: short(r.output, 80) }),
      el("td", { class: "feedback", text: short(r.error ? r.error.message : r.feedback, 80) }),
      el("td", { class: "num", text: fmt.int(tokens(r.usage) + tokens(r.scorer_usage)) }),
      el("td", { class: "num", text: fmt.latency(r.latency_s) }), el("td", { text: flags.filter(Boolean).join(" ") }));
    node.rowRef = row;
    return node;
  }

  function openTrajectory(row) {
    if (!row) return;
    state.trajectory = row.key;
    for (const node of document.querySelectorAll("#results-table tbody tr")) node.classList.toggle("selected", node.rowRef === row);
    renderTrajectory();
    byId("trajectory").scrollIntoView({ block: "nearest" });
  }

  function message(role, text, summary) {
    const body = el("pre", { class: "message-text", text });
    if (!summary) return el("div", { class: "message " + role }, el("div", { class: "role", text: role }), body);
    return el("details", { class: "message " + role }, el("summary", null, el("span", { class: "role", text: role }),
      " " + summary), body);
  }

  function renderTrajectory() {
    const box = byId("trajectory");
    const row = state.trajectory && state.rows.find((candidate) => candidate.key === state.trajectory);
    if (!row) return fill(box, el("p", { class: "hint", text: "Click a result to see its whole trajectory." }));
    const r = row.r, ev = row.ev, skill = ev.skill ? state.bundle.skills[ev.skill] : undefined;
    const steps = Array.isArray(r.trajectory) ? r.trajectory : null;
    const cut = [r.prompt, r.output, r.expected, r.feedback, r.transcript].some(isTruncated)
      || (steps || []).some((s) => isTruncated(s.text) || isTruncated(s.arguments));
    const limit = (state.bundle.limits || {}).text_chars;
    fill(box, el("h3", { text: `${r.task_id} · repeat ${r.repeat}` }),
      el("p", { class: "meta", text: `${ev.label} · split ${ev.split || "—"}` }),
      el("p", null, badge(verdictOf(r)[0]), ` score ${fmt.score(r.score)}`),
      r.error ? el("p", { class: "error-text", text: `error (${r.error.kind}): ${r.error.message}` }) : null,
      cut ? el("p", { class: "note", text: `Some texts are cut to ${limit} characters here; the run directory keeps them whole.` })
        : null,
      el("h4", { text: "Messages" }),
      message("system", skill === undefined ? "(the skill text is not in the run directory)" : skill,
        `the skill (${ev.skill || "unknown"}, ${skill === undefined ? 0 : skill.length} characters) — click to show`),
      message("user", asText(r.prompt)),
      steps ? stepsBlock(row, steps) : null,
      message("assistant", missing(r.output) ? "(no output)" : asText(r.output)),
      Array.isArray(r.files) ? filesBlock(r) : null,
      r.transcript ? transcriptBlock(r.transcript) : null,
      el("h4", { text: "Expected" }), el("pre", { class: "expected", text: asText(r.expected) || "—" }),
      el("h4", { text: "Scorer feedback" }), el("pre", { class: "feedback", text: r.feedback || "—" }),
      kv([["passed", String(r.passed)], ["score", fmt.score(r.score)], ["tokens", fmt.usage(r.usage)],
        ["scorer tokens", fmt.usage(r.scorer_usage)], ["latency", fmt.latency(r.latency_s)], ["cost", fmt.cost(r.cost_usd)],
        ["cached", r.cached ? "yes" : "no"], ["finish reason", r.finish_reason || "—"],
        ["reward", typeof r.reward === "number" ? fixed(r.reward, 3) : null], ["steps", steps ? String(stepTotal(steps)) : null]]));
  }

  // ---- a rollout's steps (results of environments beyond chat) --------------------------------

  const STEP_LABELS = { model: "model", tool_call: "tool call", tool_result: "tool result", observation: "observation",
    action: "action", error: "error" };
  const LONG_CHARS = 1500, LONG_LINES = 24; // a longer step text shows its start and a "show all" button
  const DATA_IMAGE = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}$/;

  function remember(key, open) {
    if (open) state.open.add(key);
    else state.open.delete(key);
  }

  function longText(text, cls, key) { // kept open across the live viewer's re-renders
    const lines = text.split("\n");
    if ((text.length <= LONG_CHARS && lines.length <= LONG_LINES) || state.open.has(key)) return el("pre", { class: cls, text });
    const pre = el("pre", { class: cls + " collapsed", text: lines.slice(0, LONG_LINES).join("\n").slice(0, LONG_CHARS) + " …" });
    const button = el("button", { type: "button", class: "link show-all",
      text: `show all (${fmt.int(text.length)} characters, ${fmt.int(lines.length)} lines)`,
      onclick: () => { remember(key, true); pre.textContent = text; pre.classList.remove("collapsed"); button.remove(); } });
    return [pre, button];
  }

  const realSteps = (steps) => steps.filter((s) => s.kind !== "gap");
  const stepTotal = (steps) => steps.reduce((n, s) => n + (s.kind === "gap" ? s.omitted || 0 : 1), 0);
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

  function stepSummary(steps) {
    const real = realSteps(steps), count = (kind) => real.filter((s) => s.kind === kind).length;
    const errors = real.filter((s) => s.kind === "error" || s.is_error === true).length;
    const images = real.reduce((n, s) => n + (Array.isArray(s.images) ? s.images.length : 0), 0);
    const last = real.length ? real[real.length - 1].elapsed_s : null;
    return [plural(stepTotal(steps), "step"), count("tool_call") && plural(count("tool_call"), "tool call"),
      count("action") && plural(count("action"), "action"), errors && plural(errors, "error"),
      images && plural(images, "image"), typeof last === "number" && fixed(last, 2) + "s"].filter(Boolean).join(" · ");
  }

  function stepsBlock(row, steps) {
    const key = row.key + "\u0000steps";
    return el("details", { class: "message steps", open: state.open.has(key), ontoggle: (event) => remember(key, event.target.open) },
      el("summary", null, el("span", { class: "role", text: "trajectory" }), " " + stepSummary(steps) + " — click to show"),
      steps.length ? el("ol", { class: "step-list" }, steps.map((s) => stepItem(row, s)))
        : el("p", { class: "note", text: "No steps were recorded." }));
  }

  function stepHead(step, failed) {
    const kind = String(step.kind), usage = step.usage && tokens(step.usage) ? fmt.usage(step.usage) : null;
    return el("div", { class: "step-head" }, el("span", { class: "step-n", text: String(step.n) }),
      el("span", { class: "step-kind", text: STEP_LABELS[kind] || kind }),
      step.name ? el("code", { class: "step-name", text: step.name }) : null,
      failed && kind !== "error" ? badge("error") : null,
      typeof step.reward === "number" ? el("span", { class: "step-reward", text: "reward " + fixed(step.reward, 3) }) : null,
      step.done === true ? badge("done") : null,
      step.call_id ? el("span", { class: "meta", text: "call " + step.call_id }) : null,
      usage ? el("span", { class: "meta", text: usage }) : null,
      typeof step.elapsed_s === "number" ? el("span", { class: "meta step-time", text: "at " + fixed(step.elapsed_s, 2) + "s" }) : null);
  }

  function stepItem(row, step) {
    if (step.kind === "gap") {
      return el("li", { class: "step gap" }, el("p", { class: "note",
        text: `${plural(step.omitted || 0, "step")} not shown here: results.jsonl in the run directory has them all.` }));
    }
    const failed = step.kind === "error" || step.is_error === true;
    const key = row.key + "\u0000step\u0000" + step.n;
    const cls = "step kind-" + String(step.kind).replace(/[^a-z_]+/g, "") + (failed ? " failed" : "");
    return el("li", { class: cls, "data-kind": step.kind, "data-n": step.n }, stepHead(step, failed),
      step.text ? longText(step.text, "step-text", key + "\u0000text") : null,
      typeof step.arguments === "string" ? longText(step.arguments, "step-args", key + "\u0000args") : null,
      step.arguments_json === false ? el("p", { class: "note", text: "not valid JSON: shown as the model wrote it" }) : null,
      Array.isArray(step.images) && step.images.length
        ? el("div", { class: "thumbs" }, step.images.map((ref, i) => thumbnail(ref, i, step))) : null);
  }

  function thumbnail(ref, i, step) {
    const image = (state.bundle.images || {})[ref] || { name: ref, note: "not in this report" };
    if (typeof image.src !== "string" || !DATA_IMAGE.test(image.src)) {
      return el("p", { class: "note image-note", text: `image ${image.name || ref}: ${image.note || "not shown"}` });
    }
    const size = typeof image.bytes === "number" ? `, ${fmt.int(Math.ceil(image.bytes / 1024))} KiB` : "";
    const node = el("img", { class: "thumb", src: image.src, alt: `image ${i + 1} of step ${step.n} (${image.name}${size})`,
      title: `${image.name}${size}: click to enlarge`, ...onActivate(() => node.classList.toggle("large")) });
    return node;
  }

  function filesBlock(r) {
    const size = (f) => (typeof f.bytes === "number" ? ` (${fmt.int(f.bytes)} bytes)` : " (not kept)");
    return [el("h4", { text: "Files written" }), el("ul", { class: "files" }, r.files.map((f) =>
      el("li", { class: typeof f.bytes === "number" ? "kept" : "not-kept" }, el("code", { text: f.path }), size(f)))),
    r.files_omitted ? el("p", { class: "note", text: `and ${r.files_omitted} more` }) : null,
    el("p", { class: "meta", text: "copies are kept in the run directory under files/<task>/<repeat>/ while their total is small" })];
  }

  function transcriptBlock(text) {
    return el("details", { class: "message transcript" }, el("summary", null, el("span", { class: "role", text: "transcript" }),
      ` what the optimizer reads (${fmt.int(text.length)} characters) — click to show`), el("pre", { class: "message-text", text }));
  }

  // ---- live mode: the run list and polling ----------------------------------------------------

  async function getJson(url) {
    const response = await fetch(url, { cache: "no-store", headers: { Accept: "application/json" } });
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) {
      throw Object.assign(new Error((data && data.error) || `HTTP ${response.status}`), { status: response.status });
    }
    if (data === null) throw new Error("the answer is not JSON");
    return data;
  }

  async function refreshRunList() {
    try {
      renderRunList(await getJson("/api/runs"));
      showError("runs", null);
    } catch (err) {
      showError("runs", `Could not load the list of runs: ${err.message} (is skillopt-ci view still running?)`);
    }
    setTimeout(refreshRunList, RUNS_POLL_MS);
  }

  function renderRunList(data) {
    byId("runs-root").textContent = data.root;
    const items = data.runs.map((run) => el("li", null, el("a", { class: "run-link", href: "#run=" + encodeURIComponent(run.id),
      "data-run": run.id, "aria-current": run.id === state.runId ? "true" : null },
    el("span", { class: "run-title", text: run.title }), el("span", { class: "run-id", text: run.id }),
    badge(run.kind, "kind"), " ", run.in_progress ? badge("in progress") : null,
    el("span", { class: "meta", text: " " + run.modified }))));
    fill(byId("run-list"), items.length ? items : el("li", { class: "hint", text: "No runs here yet." }));
    const open = data.runs.find((run) => run.id === state.runId);
    if (open && open.in_progress && state.bundle && !(state.bundle.live || {}).in_progress) {
      state.generation += 1; // a new session started on the open run: follow it again
      poll(state.generation);
    }
  }

  function openFromHash() {
    let id;
    try {
      id = location.hash.startsWith("#run=") ? decodeURIComponent(location.hash.slice(5)) : null;
    } catch (_) {
      id = null; // a hand-edited hash that is not valid percent-encoding: stay where we are
    }
    if (id === null) return;
    for (const link of document.querySelectorAll("a.run-link")) {
      link.setAttribute("aria-current", String(link.getAttribute("data-run") === id));
    }
    if (id !== state.runId) {
      Object.assign(state, { runId: id, bundle: null, signature: null, kindShown: null, step: null, trajectory: null,
        limit: PAGE, diffFrom: null, diffTo: null, diffChosen: false, filters: { ...NO_FILTERS }, open: new Set() });
      fill(byId("main"), el("p", { class: "hint", text: "Loading " + id + "…" }));
    }
    state.generation += 1;
    clearTimeout(state.timer);
    poll(state.generation);
  }

  async function poll(generation) {
    const id = state.runId;
    let bundle;
    try {
      bundle = await getJson("/api/run?id=" + encodeURIComponent(id));
    } catch (err) {
      if (generation !== state.generation) return;
      const retry = !err.status || err.status >= 500;
      showError("run", `Could not load run ${id}: ${err.message}` + (retry ? " (retrying)" : ""));
      if (retry) state.timer = setTimeout(() => poll(generation), 3 * POLL_MS);
      return;
    }
    if (generation !== state.generation) return; // another run was chosen meanwhile
    showError("run", null);
    showRun(bundle);
    if (bundle.live && bundle.live.in_progress) state.timer = setTimeout(() => poll(generation), POLL_MS);
  }

  // ---- start ----------------------------------------------------------------------------------

  async function inflate(packed) { // a big bundle, gzipped and base64-encoded by html.py
    const text = atob(packed.data);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  async function boot() {
    const data = byId("bundle");
    state.live = !data;
    buildShell(state.live);
    if (state.live) {
      window.addEventListener("hashchange", openFromHash);
      refreshRunList();
      openFromHash();
      return;
    }
    let bundle;
    try {
      bundle = JSON.parse(data.textContent);
      if (bundle.encoding === "gzip+base64") bundle = await inflate(bundle);
    } catch (err) {
      showError("data", "This report's data is damaged: " + err.message);
      return;
    }
    showRun(bundle);
  }

  boot();
})();
