// One queue: when its timers fire (the histogram), and its timers page by page with a prefix
// filter, peek, cancel, fire now, reschedule and a bulk cancel by prefix. The prefix filter
// drives everything on the page: the stat cards, the chart, the list and the bulk count.
import { call, enc, keyPath, pathSafe } from "../api.js";
import { confirmAction } from "../dialog.js";
import { errorBox, errorText, fmtInt, h, replace, shown } from "../dom.js";
import { queuePicker } from "../picker.js";
import { absolute, relative, retryRelative, zoneName } from "../time.js";
import { chart, NARROW } from "./histogram.js";

const WINDOWS = [
  ["hour", "Next hour"],
  ["day", "Next day"],
  ["90d", "Next 90 days"],
];
const DEFAULT_PAGE = 50;
// Keys one bulk-cancel call removes: the route's bound, in batches the console loops over.
const BULK_BATCH = 1000;
const STATES = { waiting: "waiting", claimed: "claimed", backing_off: "backing off" };

function stateOf(row) {
  return row.state || (row.claimed ? "claimed" : "waiting");
}

// The instant a backing-off row is retried (the service's retryAt), or null: its deliverAt has
// passed, yet it is not late but waiting out a backoff, so the console shows the retry instead.
function retryOf(row) {
  return stateOf(row) === "backing_off" && row.retryAt ? row.retryAt : null;
}

// A relative time kept current in place: a retry's own wording, or in / late.
function relText(el) {
  return el.dataset.retry ? retryRelative(el.dataset.at) : relative(el.dataset.at);
}

// The payload as the operator wants to read it: JSON decoded where the bytes are JSON and in
// the clear; otherwise why it is not shown decoded.
export function describePayload(t) {
  if (t.encrypted) return { kind: "encrypted", text: "encrypted at rest: not decoded in the console" };
  if (t.payloadZstd) return { kind: "zstd", text: `zstd-compressed, base64: ${t.payload}` };
  let bytes;
  try {
    bytes = Uint8Array.from(atob(t.payload || ""), (c) => c.charCodeAt(0));
  } catch {
    return { kind: "base64", text: t.payload };
  }
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    try {
      return { kind: "json", text: JSON.stringify(JSON.parse(text), null, 2) };
    } catch {
      return { kind: "text", text };
    }
  } catch {
    return { kind: "base64", text: t.payload };
  }
}

export function mount(root, params, ctx) {
  const st = {
    queue: params.get("name") || "",
    prefix: params.get("prefix") || "",
    window: params.get("window") || "day",
    size: Math.min(1000, Math.max(1, Number(params.get("size")) || DEFAULT_PAGE)),
    cursors: [null], // the `after` of every page up to the current one
    next: null,
  };
  const picker = queuePicker({ id: "queue-name", value: st.queue, onPick: () => show() });
  const prefixInput = h("input", { id: "prefix", value: st.prefix, placeholder: "key prefix (optional)" });
  const pick = h("form", { class: "toolbar", id: "queue-form" },
    h("label", { for: "queue-name-pick" }, "Queue"), picker.select, picker.input,
    h("label", { for: "prefix" }, "Prefix"), prefixInput,
    h("button", { type: "submit" }, "Show"));
  const filterLine = h("p", { id: "filter-line", class: "muted", hidden: true });
  const summary = h("div", { id: "queue-summary", class: "cards" });
  const windowBar = h("div", { class: "segmented", role: "group", "aria-label": "window" });
  const chartBox = h("div", { id: "histogram" });
  const countLine = h("p", { id: "count", class: "muted" });
  const bulkBtn = h("button", { type: "button", id: "bulk-cancel", class: "danger", hidden: true });
  const bulkStatus = h("p", { id: "bulk-status", role: "status" });
  const actionStatus = h("p", { id: "action-status", role: "status" });
  const table = h("div", { id: "timers", class: "scroll" });
  const prevBtn = h("button", { type: "button", id: "prev-page" }, "‹ Previous");
  const nextBtn = h("button", { type: "button", id: "next-page" }, "Next ›");
  const firstBtn = h("button", { type: "button", id: "first-page" }, "First");
  const pageLine = h("span", { id: "page", class: "muted" });
  const peekBox = h("section", { id: "peek", class: "peek-box", hidden: true });

  root.append(h("h1", { id: "queue-title" }, st.queue ? `Queue ${st.queue}` : "Timers"), pick, filterLine, summary,
    h("section", { class: "card wide" }, h("h2", null, "When it fires"), windowBar, chartBox),
    h("section", { class: "card wide" }, h("h2", null, "Timers"),
      h("div", { class: "toolbar" }, countLine, bulkBtn), bulkStatus, actionStatus, peekBox, table,
      h("div", { class: "pager" }, firstBtn, prevBtn, pageLine, nextBtn),
      h("p", { class: "muted small" }, `Times are in ${zoneName()}.`)));

  let last = { summary: "", chart: "", page: "", count: "" };

  function share() {
    ctx.setParams("queue", { name: st.queue, prefix: st.prefix,
      window: st.window === "day" ? "" : st.window, size: st.size === DEFAULT_PAGE ? "" : String(st.size) });
  }

  function renderWindows() {
    replace(windowBar, WINDOWS.map(([w, label]) => h("button", {
      type: "button", class: w === st.window ? "active" : "", dataset: { window: w },
      "aria-pressed": w === st.window ? "true" : "false",
      onclick: () => { st.window = w; share(); renderWindows(); last.chart = ""; loadChart(); },
    }, label)));
  }

  // -- reads --------------------------------------------------------------------------------
  // One page of timers. With a prefix the list route is read from the prefix on: keys that
  // start with it are contiguous in the routes' byte order and all sort at or after it, so
  // the page is the exact key (peeked) and then the keys after it, cut at the first key that
  // does not match. One row more than the page is read, so "next" is exact too.
  async function listPage(after) {
    const timers = `/api/v1/timers/${enc(st.queue)}`;
    if (!st.prefix) return call("GET", timers, { query: { after, limit: st.size } });
    const rows = [];
    let from = after;
    if (after === null) {
      from = st.prefix;
      if (pathSafe(st.prefix)) {
        const exact = await call("GET", `${timers}/${keyPath(st.prefix)}`);
        if (exact.found) {
          const { payload, found, ...row } = exact;
          rows.push(row);
        }
      }
    }
    const want = st.size - rows.length;
    const limit = Math.min(want + 1, 1000); // the route's largest page
    const doc = await call("GET", timers, { query: { after: from, limit } });
    const matching = [];
    for (const r of doc.rows || []) {
      if (!r.timerKey.startsWith(st.prefix)) break;
      matching.push(r);
    }
    rows.push(...matching.slice(0, want));
    const full = matching.length === doc.rows.length && doc.truncated;
    const more = matching.length > want || (limit <= want && full);
    return { rows, truncated: more, nextAfter: more && rows.length ? rows[rows.length - 1].timerKey : null };
  }

  // The stat cards count what the filter shows: with a prefix, the keys that start with it.
  function renderFilter() {
    filterLine.hidden = !st.prefix;
    replace(filterLine, st.prefix
      ? ["Every figure on this page counts the timers whose keys start with ", h("code", null, shown(st.prefix)), "."]
      : []);
  }

  async function loadSummary() {
    try {
      const q = await call("GET", `/api/v1/resources/queues/${enc(st.queue)}`, { query: { prefix: st.prefix } });
      const key = JSON.stringify(q);
      if (key === last.summary) return;
      last.summary = key;
      const t = q.timers || {};
      const item = (label, v, field, warn) => h("div", { class: warn ? "stat warn" : "stat" },
        h("span", { class: "label" }, label), h("span", { class: "value", dataset: { field } }, v));
      replace(summary,
        item("Pending", fmtInt(t.pending), "pending"),
        item("Due 1 min", fmtInt(t.dueNextMinute), "dueNextMinute"),
        item("Overdue", fmtInt(t.overdue), "overdue", t.overdue > 0),
        item("Backing off", fmtInt(t.backingOff), "backingOff", t.backingOff > 0),
        item("Claimed", fmtInt(t.claimed), "claimed"),
        item("Dead letters", fmtInt(q.deadLetters), "deadLetters", q.deadLetters > 0));
    } catch (err) {
      last.summary = "";
      let said = errorBox(err);
      if (err.status === 404 && err.code === "queue_not_found") {
        said = h("p", { class: "muted", id: "queue-empty" }, st.prefix
          ? "Nothing pending with this prefix, and no messages in this queue."
          : "Nothing pending and no messages in this queue.");
      }
      replace(summary, said);
    }
  }

  async function loadChart() {
    try {
      const doc = await call("GET", `/api/v1/timers/${enc(st.queue)}`, { query: { mode: "histogram", window: st.window, prefix: st.prefix } });
      const { from, to, ...shape } = doc; // the window moves with the clock: redraw on counts
      const key = JSON.stringify([shape.window, shape.prefix, shape.overdue, shape.later, shape.buckets.map((b) => b.count)]);
      if (key === last.chart) return;
      last.chart = key;
      replace(chartBox, chart({ ...shape, from, to }));
    } catch (err) {
      last.chart = "";
      replace(chartBox, errorBox(err));
    }
  }

  async function loadCount() {
    if (!st.prefix) {
      replace(countLine, "");
      bulkBtn.hidden = true;
      return;
    }
    try {
      const { count } = await call("GET", `/api/v1/timers/${enc(st.queue)}`, { query: { mode: "count", prefix: st.prefix } });
      st.count = count;
      replace(countLine, `${fmtInt(count)} timer${count === 1 ? "" : "s"} with keys starting with `,
        h("code", null, shown(st.prefix)));
      bulkBtn.hidden = count === 0;
      replace(bulkBtn, `Cancel all ${fmtInt(count)}…`);
    } catch (err) {
      replace(countLine, errorBox(err));
      bulkBtn.hidden = true;
    }
  }

  function row(t) {
    const state = stateOf(t);
    const retryAt = retryOf(t);
    const late = !retryAt && Date.parse(t.deliverAt) < Date.now();
    const due = retryAt
      ? h("td", { class: "due retry", "data-label": "Due", title: `due ${absolute(t.deliverAt)}; a fire failed, retried at ${absolute(retryAt)}` },
        h("span", { class: "abs" }, absolute(retryAt)), h("br"),
        h("span", { class: "rel muted", dataset: { at: retryAt, retry: "1" } }, retryRelative(retryAt)))
      : h("td", { class: late ? "due warn" : "due", "data-label": "Due" },
        h("span", { class: "abs" }, absolute(t.deliverAt)), h("br"),
        h("span", { class: "rel muted", dataset: { at: t.deliverAt } }, relative(t.deliverAt)));
    return h("tr", { dataset: { key: t.timerKey, state } },
      h("td", { class: "key", "data-label": "Key" }, h("code", null, shown(t.timerKey))),
      due,
      h("td", { "data-label": "State" }, h("span", { class: `pill ${state}` }, STATES[state] || state)),
      h("td", { class: "num", "data-label": "Attempts" }, fmtInt(t.attempts)),
      h("td", { class: "lasterror", "data-label": "Last error" }, t.lastError || ""),
      h("td", { class: "actions" },
        h("button", { type: "button", class: "peek", onclick: () => peek(t.timerKey) }, "Peek"),
        h("button", { type: "button", class: "fire", onclick: () => fireNow(t.timerKey) }, "Fire now"),
        h("button", { type: "button", class: "reschedule", onclick: () => reschedule(t.timerKey) }, "Reschedule"),
        h("button", { type: "button", class: "cancel danger", onclick: () => cancel(t.timerKey) }, "Cancel")));
  }

  async function loadPage() {
    const after = st.cursors[st.cursors.length - 1];
    try {
      const doc = await listPage(after);
      const key = JSON.stringify(doc);
      if (key === last.page) {
        // Same rows: only the relative times move with the clock, updated in place.
        for (const el of table.querySelectorAll(".rel[data-at]")) el.textContent = relText(el);
        return;
      }
      last.page = key;
      st.next = doc.truncated ? doc.nextAfter : null;
      const rows = doc.rows || [];
      replace(table, rows.length
        ? h("table", { class: "grid cards-narrow", id: "timers-table" },
          h("thead", null, h("tr", null, ["Key", "Due", "State", "Attempts", "Last error", ""].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", null, rows.map(row)))
        : h("p", { class: "muted", id: "no-timers" }, st.prefix ? "No timers with this prefix on this page." : "No pending timers."));
      prevBtn.disabled = st.cursors.length <= 1;
      firstBtn.disabled = st.cursors.length <= 1;
      nextBtn.disabled = !st.next;
      replace(pageLine, `page ${st.cursors.length}`);
    } catch (err) {
      last.page = "";
      replace(table, errorBox(err));
    }
  }

  async function refresh() {
    if (!st.queue) {
      replace(table, h("p", { class: "muted" }, "Pick a queue."));
      return;
    }
    await Promise.all([loadSummary(), loadChart(), loadPage(), loadCount()]);
  }

  async function reload() {
    last = { summary: "", chart: "", page: "", count: "" };
    await refresh();
  }

  // -- actions ------------------------------------------------------------------------------
  function said(text, ok = true) {
    replace(actionStatus, text);
    actionStatus.className = ok ? "ok" : "error";
  }

  async function peekTimer(key) {
    if (pathSafe(key)) return call("GET", `/api/v1/timers/${enc(st.queue)}/${keyPath(key)}`);
    throw new Error("this key has a '.' or '..' segment, which a browser cannot send in a URL path; peek it with a client");
  }

  async function peek(key) {
    peekBox.hidden = false;
    replace(peekBox, h("h2", null, "Peek"), h("p", { class: "muted" }, "loading…"));
    try {
      const t = await peekTimer(key);
      if (!t.found) {
        replace(peekBox, h("h2", null, "Peek"), h("p", { id: "peek-missing" }, "No longer pending: ", h("code", null, shown(key))));
        return;
      }
      const p = describePayload(t);
      const field = (label, v) => [h("dt", null, label), h("dd", null, v === null || v === undefined ? "–" : String(v))];
      const retryAt = retryOf(t);
      replace(peekBox, h("h2", null, "Peek ", h("code", { id: "peek-key" }, shown(t.timerKey))),
        h("dl", { class: "fields" },
          // A backing-off timer's due time has passed and is not the news: its retry is.
          field("Due", retryAt ? absolute(t.deliverAt) : `${absolute(t.deliverAt)} (${relative(t.deliverAt)})`),
          field("State", STATES[stateOf(t)] || stateOf(t)),
          retryAt ? field("Retry", `${absolute(retryAt)} (${retryRelative(retryAt)})`) : [],
          field("Partition", t.partition), field("txn", t.txn), field("Message id", t.messageId),
          field("Attempts", t.attempts), field("Last error", t.lastError),
          field("Producer", t.producerSub), field("Created", t.createdAt && absolute(t.createdAt)),
          field("Updated", t.updatedAt && absolute(t.updatedAt))),
        h("h3", null, `Payload (${p.kind})`),
        h("pre", { id: "peek-payload", dataset: { kind: p.kind } }, p.text),
        h("button", { type: "button", onclick: () => { peekBox.hidden = true; } }, "Close"));
    } catch (err) {
      replace(peekBox, h("h2", null, "Peek"), errorBox(err));
    }
  }

  async function cancel(key) {
    const ok = await confirmAction({ title: "Cancel this timer?", text: ["The timer “", shown(key), `” of queue “${st.queue}” will not fire.`], ok: "Cancel timer" });
    if (!ok) return;
    said("working…");
    try {
      const res = pathSafe(key)
        ? await call("DELETE", `/api/v1/timers/${enc(st.queue)}/${keyPath(key)}`)
        : (await call("POST", "/api/v1/timers", { body: { operations: [{ op: "cancel", queue: st.queue, timerKey: key }] } })).results[0];
      said([`${res.status}: `, shown(key)], res.ok);
    } catch (err) {
      said(errorText(err), false);
    }
    await reload();
  }

  async function fireNow(key) {
    const ok = await confirmAction({ title: "Fire this timer now?", text: ["The timer “", shown(key), `” is delivered into queue “${st.queue}” at once, with its message id and txn.`], ok: "Fire now" });
    if (!ok) return;
    said("working…");
    try {
      const res = await call("POST", `/api/v1/timers/${enc(st.queue)}/fire`, { body: { timerKey: key } });
      said([`${res.status}: `, shown(key)], res.status === "rescheduled");
    } catch (err) {
      said(errorText(err), false);
    }
    await reload();
  }

  async function reschedule(key) {
    const amount = h("input", { id: "delay-amount", type: "number", min: "0", step: "any", value: "10", required: true });
    const unit = h("select", { id: "delay-unit" },
      [["1000", "seconds"], ["60000", "minutes"], ["3600000", "hours"], ["86400000", "days"]]
        .map(([v, label]) => h("option", { value: v, selected: v === "60000" }, label)));
    const ok = await confirmAction({
      title: "Reschedule this timer?",
      text: ["The timer “", shown(key), "” fires after the new delay, counted from now. A rescheduled timer is a new message (new message id)."],
      extra: h("p", null, h("label", { for: "delay-amount" }, "Fire in "), amount, " ", unit),
      ok: "Reschedule",
    });
    if (!ok) return;
    const delayMs = Number(amount.value) * Number(unit.value);
    said("working…");
    try {
      const t = await peekTimer(key);
      if (!t.found) {
        said(["absent: ", shown(key)], false);
      } else if (t.encrypted) {
        said(["not rescheduled: ", shown(key), " is encrypted at rest, and only its producer holds the clear payload"], false);
      } else {
        const op = { op: "reschedule", queue: st.queue, timerKey: key, delayMs, txn: t.txn, payload: t.payload };
        if (t.partition) op.partition = t.partition;
        if (t.payloadZstd) op.payloadZstd = true;
        const { results } = await call("POST", "/api/v1/timers", { body: { operations: [op] } });
        const r = results[0];
        said([`${r.status}: `, shown(key), `${r.deliverAt ? ` now due ${absolute(r.deliverAt)}` : ""}${r.detail ? ` (${r.detail})` : ""}`], r.ok);
      }
    } catch (err) {
      said(errorText(err), false);
    }
    await reload();
  }

  async function bulkCancel() {
    const prefix = st.prefix;
    await loadCount();
    const count = st.count || 0;
    if (!count) return;
    const ok = await confirmAction({
      title: `Cancel ${fmtInt(count)} timer${count === 1 ? "" : "s"}?`,
      text: [`Every timer of queue “${st.queue}” whose key starts with “`, shown(prefix), `” (${fmtInt(count)} now) is cancelled, in batches of ${fmtInt(BULK_BATCH)}.`],
      ok: `Cancel ${fmtInt(count)}`,
    });
    if (!ok) return;
    const total = { cancelled: 0, absent: 0, tooLate: 0 };
    let batches = 0;
    bulkStatus.className = "";
    try {
      for (;;) {
        const res = await call("POST", `/api/v1/timers/${enc(st.queue)}/cancel-prefix`, { body: { prefix, limit: BULK_BATCH } });
        batches += 1;
        total.cancelled += res.cancelled;
        total.absent += res.absent;
        total.tooLate += res.tooLate;
        replace(bulkStatus, `batch ${batches}: cancelled ${fmtInt(total.cancelled)}, absent ${fmtInt(total.absent)}, too_late ${fmtInt(total.tooLate)}`);
        // A batch that removed nothing while more remain holds only keys a broker is firing:
        // stop rather than spin; the operator sees them counted as too_late.
        if (!res.remaining || res.cancelled + res.absent === 0) break;
      }
      replace(bulkStatus, `Done in ${batches} batch${batches === 1 ? "" : "es"}: cancelled ${fmtInt(total.cancelled)}, absent ${fmtInt(total.absent)}, too_late ${fmtInt(total.tooLate)}.`);
      bulkStatus.className = "ok";
    } catch (err) {
      replace(bulkStatus, `${errorText(err)} (after cancelling ${fmtInt(total.cancelled)})`);
      bulkStatus.className = "error";
    }
    st.cursors = [null];
    await reload();
  }

  // -- wiring -------------------------------------------------------------------------------
  function show() {
    st.queue = picker.value();
    st.prefix = prefixInput.value;
    st.cursors = [null];
    replace(document.getElementById("queue-title"), st.queue ? `Queue ${st.queue}` : "Timers");
    peekBox.hidden = true;
    picker.settle();
    renderFilter();
    share();
    reload();
  }

  pick.addEventListener("submit", (ev) => {
    ev.preventDefault();
    show();
  });
  nextBtn.addEventListener("click", () => { if (st.next) { st.cursors.push(st.next); last.page = ""; loadPage(); } });
  prevBtn.addEventListener("click", () => { if (st.cursors.length > 1) { st.cursors.pop(); last.page = ""; loadPage(); } });
  firstBtn.addEventListener("click", () => { st.cursors = [null]; last.page = ""; loadPage(); });
  bulkBtn.addEventListener("click", bulkCancel);
  // The chart's time labels are fitted to the layout's width: redrawn when it changes.
  const narrow = window.matchMedia(NARROW);
  const redraw = () => { last.chart = ""; if (st.queue) loadChart(); };
  narrow.addEventListener("change", redraw);
  renderWindows();
  renderFilter();
  picker.load();
  return { refresh, unmount: () => narrow.removeEventListener("change", redraw) };
}
