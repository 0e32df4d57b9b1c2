// Dead letters of one queue: a window on when they failed, the detail of each, replay (push
// into the queue again, or schedule as a timer) and delete. A dead letter that came from a
// timer (its fire failed too often) names that timer's key.
import { call } from "../api.js";
import { confirmAction } from "../dialog.js";
import { errorBox, errorText, fmtInt, h, replace, shown } from "../dom.js";
import { queuePicker } from "../picker.js";
import { absolute, ago, isoToLocalInput, localInputToIso, zoneName } from "../time.js";

const PAGE = 50;

export function mount(root, params, ctx) {
  const st = { queue: params.get("queue") || "", from: params.get("from") || "", to: params.get("to") || "", offset: 0, rows: [] };
  const picker = queuePicker({ id: "dlq-queue", value: st.queue, onPick: () => form.requestSubmit() });
  const fromInput = h("input", { id: "dlq-from", type: "datetime-local", value: isoToLocalInput(st.from) });
  const toInput = h("input", { id: "dlq-to", type: "datetime-local", value: isoToLocalInput(st.to) });
  const form = h("form", { class: "toolbar", id: "dlq-form" },
    h("label", { for: "dlq-queue-pick" }, "Queue"), picker.select, picker.input,
    h("label", { for: "dlq-from" }, "Failed from"), fromInput,
    h("label", { for: "dlq-to" }, "to"), toInput,
    h("button", { type: "submit" }, "Show"));
  const totalLine = h("p", { id: "dlq-total", class: "muted" });
  const status = h("p", { id: "dlq-status", role: "status" });
  const list = h("div", { id: "dlq-list", class: "scroll" });
  const detail = h("section", { id: "dlq-detail", class: "card wide", hidden: true });
  const replayPush = h("button", { type: "button", id: "dlq-replay-push" }, "Replay: push to the queue");
  const replaySchedule = h("button", { type: "button", id: "dlq-replay-schedule" }, "Replay: schedule…");
  const del = h("button", { type: "button", id: "dlq-delete", class: "danger" }, "Delete…");
  const prev = h("button", { type: "button", id: "dlq-prev" }, "‹ Newer");
  const next = h("button", { type: "button", id: "dlq-next" }, "Older ›");
  root.append(h("h1", null, "Dead letters"), form,
    h("section", { class: "card wide" }, h("div", { class: "toolbar" }, totalLine, replayPush, replaySchedule, del),
      status, list, h("div", { class: "pager" }, prev, next),
      h("p", { class: "muted small" }, `Times are in ${zoneName()}.`)),
    detail);
  let last = "";

  function share() {
    ctx.setParams("dlq", { queue: st.queue, from: st.from, to: st.to });
  }

  function selected() {
    const picked = new Set([...list.querySelectorAll("input.pick:checked")].map((c) => c.value));
    return st.rows.filter((m) => picked.has(m.id)).map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId }));
  }

  function show(m) {
    detail.hidden = false;
    const field = (label, v) => [h("dt", null, label), h("dd", null, v === null || v === undefined ? "–" : String(v))];
    replace(detail, h("h2", null, "Dead letter ", h("code", null, m.transactionId)),
      h("dl", { class: "fields" },
        field("Failed", `${absolute(m.failedAt)} (${ago(m.failedAt)})`),
        m.timerKey === null || m.timerKey === undefined ? [] : [h("dt", null, "Timer key"), h("dd", { id: "dlq-timer-key" }, h("code", null, shown(m.timerKey)))],
        field("Partition", m.partition), field("Consumer group", m.consumerGroup),
        field("Message id", m.messageId), field("Offset", m.offset), field("Retries", m.retryCount),
        field("Error", m.errorMessage), field("Created", m.createdAt && absolute(m.createdAt))),
      h("h3", null, "Payload"),
      h("pre", { id: "dlq-payload" }, JSON.stringify(m.data === undefined ? m.payload : m.data, null, 2)),
      h("button", { type: "button", onclick: () => { detail.hidden = true; } }, "Close"));
  }

  function row(m) {
    return h("tr", { dataset: { txn: m.transactionId } },
      h("td", null, h("input", { type: "checkbox", class: "pick", value: m.id, "aria-label": "select" })),
      h("td", { "data-label": "Failed" }, h("span", null, absolute(m.failedAt)), h("br"), h("span", { class: "muted" }, ago(m.failedAt))),
      h("td", { "data-label": "Partition" }, m.partition),
      h("td", { "data-label": "Transaction" }, h("code", null, m.transactionId)),
      h("td", { class: "timer", "data-label": "Timer" }, m.timerKey === null || m.timerKey === undefined ? "" : h("code", null, shown(m.timerKey))),
      h("td", { class: "num", "data-label": "Retries" }, fmtInt(m.retryCount)),
      h("td", { class: "lasterror", "data-label": "Error" }, m.errorMessage || ""),
      h("td", null, h("button", { type: "button", class: "detail", onclick: () => show(m) }, "Detail")));
  }

  async function refresh() {
    if (!st.queue) {
      replace(list, h("p", { class: "muted" }, "Pick a queue."));
      return;
    }
    try {
      const doc = await call("GET", "/api/v1/dlq", { query: { queue: st.queue, from: st.from, to: st.to, limit: PAGE, offset: st.offset } });
      const key = JSON.stringify(doc);
      if (key === last) return;
      last = key;
      st.rows = doc.messages || [];
      replace(totalLine, `${fmtInt(doc.total)} dead letter${doc.total === 1 ? "" : "s"} in the window`);
      replace(list, st.rows.length
        ? h("table", { class: "grid cards-narrow", id: "dlq-table" },
          h("thead", null, h("tr", null, ["", "Failed", "Partition", "Transaction", "Timer", "Retries", "Error", ""].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", null, st.rows.map(row)))
        : h("p", { class: "muted", id: "dlq-empty" }, "No dead letters in this window."));
      prev.disabled = st.offset === 0;
      next.disabled = st.offset + PAGE >= doc.total;
    } catch (err) {
      last = "";
      replace(list, errorBox(err));
    }
  }

  function report(verb, res) {
    const items = Array.isArray(res) ? res : res.results || res.items || [];
    const counts = {};
    for (const r of items) counts[r.status] = (counts[r.status] || 0) + 1;
    const parts = Object.entries(counts).map(([k, n]) => `${k} ${fmtInt(n)}`);
    replace(status, `${verb}: ${parts.join(", ") || "nothing"}`);
    status.className = "ok";
  }

  async function act(kind) {
    const items = selected();
    if (!items.length) {
      replace(status, "Select dead letters first.");
      status.className = "error";
      return;
    }
    const n = fmtInt(items.length);
    let body;
    let path;
    if (kind === "delete") {
      const ok = await confirmAction({ title: `Delete ${n} dead letter${items.length === 1 ? "" : "s"}?`, text: "They are removed for good.", ok: `Delete ${n}` });
      if (!ok) return;
      path = "/api/v1/dlq/delete";
      body = { items };
    } else if (kind === "push") {
      const ok = await confirmAction({ title: `Replay ${n} into “${st.queue}”?`, text: "Each one is pushed into its partition again, now.", ok: `Replay ${n}` });
      if (!ok) return;
      path = "/api/v1/dlq/replay";
      body = { items, mode: "push" };
    } else {
      const delay = h("input", { id: "dlq-delay", type: "number", min: "0", step: "any", value: "60", required: true });
      const ok = await confirmAction({
        title: `Schedule ${n} again?`, text: "Each one becomes a timer of its queue that fires after the delay.",
        extra: h("p", null, h("label", { for: "dlq-delay" }, "Delay in seconds "), delay), ok: `Schedule ${n}`,
      });
      if (!ok) return;
      path = "/api/v1/dlq/replay";
      body = { items, mode: "schedule", delayMs: Number(delay.value) * 1000 };
    }
    const verb = { delete: "Deleted", push: "Pushed again", schedule: "Scheduled again" }[kind];
    replace(status, `${verb}: working…`);
    status.className = "";
    try {
      report(verb, await call("POST", path, { body }));
    } catch (err) {
      replace(status, errorText(err));
      status.className = "error";
    }
    last = "";
    await refresh();
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    st.queue = picker.value();
    picker.settle();
    st.from = localInputToIso(fromInput.value);
    st.to = localInputToIso(toInput.value);
    st.offset = 0;
    detail.hidden = true;
    share();
    last = "";
    refresh();
  });
  prev.addEventListener("click", () => { st.offset = Math.max(0, st.offset - PAGE); last = ""; refresh(); });
  next.addEventListener("click", () => { st.offset += PAGE; last = ""; refresh(); });
  replayPush.addEventListener("click", () => act("push"));
  replaySchedule.addEventListener("click", () => act("schedule"));
  del.addEventListener("click", () => act("delete"));
  picker.load();
  return { refresh };
}
