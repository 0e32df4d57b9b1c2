// Webhook targets of the tenant: where each queue's messages are sent, paused or active, how
// many signing secrets sign them, and their limits; the detail of one with its newest delivery
// attempts; pause and resume, delete behind a confirm, and a link to the queue's dead letters
// (where a message that could not be delivered lands, and is replayed).
// Pause and resume are routes of their own (never a set: a set replaces every field, and the
// view holds no secret and shows credential headers as "***").
import { call, enc, pathSafe } from "../api.js";
import { confirmAction } from "../dialog.js";
import { errorBox, errorText, fmtInt, h, replace, shown } from "../dom.js";
import { absolute, ago, duration, zoneName } from "../time.js";

const PAGE = 1000;
const ATTEMPTS = 50;
const REDACTED = "***";

function targetPath(name) {
  return `/api/v1/webhooks/targets/${enc(name)}`;
}

function dlqLink(queue) {
  return `#/dlq?${new URLSearchParams({ queue }).toString()}`;
}

function limits(t) {
  const rate = t.ratePerS === null || t.ratePerS === undefined ? "no rate cap" : `${t.ratePerS}/s`;
  return `${fmtInt(t.concurrency)} in flight, ${rate}`;
}

export function mount(root, params, ctx) {
  const st = { target: params.get("target") || "", rows: [] };
  const status = h("p", { id: "webhooks-status", role: "status" });
  const list = h("div", { id: "webhooks-list", class: "scroll" });
  const detail = h("section", { id: "webhook-detail", class: "card wide", hidden: true });
  root.append(h("h1", null, "Webhooks"),
    h("section", { class: "card wide" }, status, list,
      h("p", { class: "muted small" }, "Targets are set with ", h("code", null, "queen webhooks set"), " or ",
        h("code", null, "POST /api/v1/webhooks/targets"), "; a message that cannot be delivered goes to its " +
        `queue's dead letters, where it is replayed. Times are in ${zoneName()}.`)),
    detail);
  let lastList = "";
  let lastDetail = "";

  function share() {
    ctx.setParams("webhooks", { target: st.target });
  }

  function say(text, ok) {
    replace(status, text);
    status.className = ok ? "ok" : "error";
  }

  async function reload() {
    lastList = "";
    lastDetail = "";
    await refresh();
  }

  async function togglePause(t) {
    const pause = !t.paused;
    const what = pause ? "Pause" : "Resume";
    const ok = await confirmAction({
      title: `${what} webhook target “${t.name}”?`,
      text: pause
        ? "Nothing more is sent; its messages wait in the queue until it is resumed."
        : "Its queue's messages are sent again, the waiting ones first.",
      extra: h("p", null, "Queue ", shown(t.queue), " → ", shown(t.url)),
      ok: what,
    });
    if (!ok) return;
    try {
      const res = await call("POST", `${targetPath(t.name)}/${pause ? "pause" : "resume"}`);
      say(`${res.paused ? "paused" : "resumed"}: ${t.name}`, true);
    } catch (err) {
      say(errorText(err), false);
    }
    await reload();
  }

  async function remove(t) {
    const ok = await confirmAction({
      title: `Delete webhook target “${t.name}”?`,
      text: "The target and its signing secrets are deleted for good; nothing more is sent. " +
        "Its queue and the messages in it stay.",
      extra: h("p", null, "Queue ", shown(t.queue), " → ", shown(t.url)),
      ok: "Delete",
    });
    if (!ok) return;
    try {
      const res = await call("DELETE", targetPath(t.name));
      say(res.deleted ? `deleted: ${t.name}` : `already gone: ${t.name}`, res.deleted);
    } catch (err) {
      say(errorText(err), false);
    }
    if (st.target === t.name) {
      st.target = "";
      detail.hidden = true;
      share();
    }
    await reload();
  }

  function buttons(t) {
    return [
      h("button", { type: "button", class: t.paused ? "resume" : "pause", onclick: () => togglePause(t) },
        t.paused ? "Resume…" : "Pause…"),
      h("button", { type: "button", class: "delete danger", onclick: () => remove(t) }, "Delete…"),
    ];
  }

  function row(t) {
    return h("tr", { dataset: { target: t.name } },
      h("td", { class: "key name", "data-label": "Target" }, shown(t.name)),
      h("td", { class: "queue", "data-label": "Queue" }, shown(t.queue)),
      h("td", { class: "url", "data-label": "URL" }, h("span", { class: "muted" }, `${t.method} `), shown(t.url)),
      h("td", { class: "state", "data-label": "State" }, t.paused ? "paused" : "active"),
      h("td", { class: "num secrets", "data-label": "Secrets" }, fmtInt((t.secrets || []).length)),
      h("td", { class: "limits", "data-label": "Limits" }, limits(t)),
      h("td", { class: "actions" },
        [h("button", { type: "button", class: "detail", onclick: () => { st.target = t.name; share(); lastDetail = ""; refresh(); } }, "Attempts"),
          buttons(t)],
        h("a", { class: "dlq", href: dlqLink(t.queue) }, "Dead letters")));
  }

  function attemptsTable(page) {
    const rows = page.attempts || [];
    if (!rows.length) return h("p", { class: "muted", id: "webhook-no-attempts" }, "No attempt yet.");
    return h("table", { class: "grid cards-narrow", id: "webhook-attempts" },
      h("thead", null, h("tr", null, ["At", "Webhook id", "Attempt", "Status", "Latency", "Outcome", "Error"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", null, rows.map((a) => h("tr", { dataset: { outcome: a.outcome } },
        h("td", { "data-label": "At" }, absolute(a.at), h("br"), h("span", { class: "muted" }, ago(a.at))),
        h("td", { class: "key", "data-label": "Webhook id" }, h("code", null, shown(a.webhookId))),
        h("td", { class: "num", "data-label": "Attempt" }, fmtInt(a.attempt)),
        h("td", { class: "num status", "data-label": "Status" }, a.status === null || a.status === undefined ? "–" : String(a.status)),
        h("td", { class: "num latency", "data-label": "Latency" }, `${fmtInt(a.latencyMs)} ms`),
        h("td", { class: "outcome", "data-label": "Outcome" }, h("span", { class: `pill ${a.outcome === "delivered" ? "ok" : a.outcome === "dead" ? "bad" : ""}` }, a.outcome)),
        h("td", { class: "lasterror", "data-label": "Error" }, a.error === null || a.error === undefined ? "" : shown(a.error))))));
  }

  function showDetail(t, page) {
    detail.hidden = false;
    const field = (label, v) => [h("dt", null, label), h("dd", null, v === null || v === undefined ? "–" : v)];
    const headers = Object.entries(t.headers || {});
    replace(detail, h("h2", null, "Webhook target ", h("code", { id: "webhook-name" }, shown(t.name))),
      h("dl", { class: "fields" },
        field("Queue", h("span", { id: "webhook-queue" }, shown(t.queue))),
        field("URL", h("span", { id: "webhook-url" }, t.method, " ", shown(t.url))),
        field("State", t.paused ? "paused" : "active"),
        field("Headers", headers.length
          ? h("ul", { id: "webhook-headers" }, headers.map(([k, v]) => h("li", null, h("code", null, shown(k)), ": ", shown(v))))
          : "none"),
        field("Timeout", duration(t.timeoutMs)),
        field("Retries", `at most ${fmtInt(t.maxAttempts)} attempts within ${duration(t.maxAgeMs)}; backoff ${duration(t.backoffMs)} to ${duration(t.maxBackoffMs)}`),
        field("Limits", limits(t)),
        field("Signing secrets", (t.secrets || []).map((x) => h("div", null, h("code", null, x.id), " ", h("span", { class: "muted" }, `added ${absolute(x.createdAt)}`)))),
        field("Updated", absolute(t.updatedAt))),
      h("p", { class: "muted small" }, `Header values such as Authorization show as ${REDACTED}; secret values are never shown back.`),
      h("div", { class: "toolbar" }, buttons(t), h("a", { id: "webhook-dlq", href: dlqLink(t.queue) }, "Dead letters of this queue (replay)")),
      h("h3", null, `Newest attempts (up to ${ATTEMPTS})`),
      attemptsTable(page),
      h("button", { type: "button", id: "webhook-close", onclick: () => { st.target = ""; share(); detail.hidden = true; } }, "Close"));
  }

  async function refresh() {
    try {
      const doc = await call("GET", "/api/v1/webhooks/targets", { query: { limit: PAGE } });
      const key = JSON.stringify(doc);
      if (key !== lastList) {
        lastList = key;
        st.rows = doc.targets || [];
        replace(list, st.rows.length
          ? h("table", { class: "grid cards-narrow", id: "webhooks-table" },
            h("thead", null, h("tr", null, ["Target", "Queue", "URL", "State", "Secrets", "Limits", ""].map((c) => h("th", { scope: "col" }, c)))),
            h("tbody", null, st.rows.map(row)))
          : h("p", { class: "muted", id: "webhooks-empty" }, "No webhook targets in this tenant."));
      }
    } catch (err) {
      lastList = "";
      replace(list, errorBox(err));
      return;
    }
    if (!st.target || !pathSafe(st.target)) return;
    try {
      const [one, page] = await Promise.all([
        call("GET", targetPath(st.target)),
        call("GET", `${targetPath(st.target)}/attempts`, { query: { limit: ATTEMPTS } }),
      ]);
      const k = JSON.stringify([one, page]);
      if (k !== lastDetail) {
        lastDetail = k;
        showDetail(one, page);
      }
    } catch (err) {
      lastDetail = "";
      detail.hidden = false;
      replace(detail, errorBox(err));
    }
  }

  return { refresh };
}
