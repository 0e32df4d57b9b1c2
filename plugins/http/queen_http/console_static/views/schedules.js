// Recurring schedules of one queue: their cadence, paused state and next run; the detail of
// one with its next occurrences (UTC and in its zone) and its last runs with their lateness;
// pause, resume and run now, each behind a confirm that names the schedule.
import { call, keyPath, pathSafe } from "../api.js";
import { confirmAction } from "../dialog.js";
import { errorBox, errorText, fmtInt, h, replace, shown } from "../dom.js";
import { absolute, relative, zoneName } from "../time.js";

const PAGE = 100;

function cadence(s) {
  return s.cron ? `cron ${s.cron}` : `every ${fmtInt(s.everyMs)} ms`;
}

export function mount(root, params, ctx) {
  const st = { queue: params.get("queue") || "", key: params.get("key") || "", rows: [] };
  const queueInput = h("input", { id: "schedules-queue", value: st.queue, placeholder: "queue name", required: true });
  const form = h("form", { class: "toolbar", id: "schedules-form" },
    h("label", { for: "schedules-queue" }, "Queue"), queueInput, h("button", { type: "submit" }, "Show"));
  const status = h("p", { id: "schedules-status", role: "status" });
  const list = h("div", { id: "schedules-list", class: "scroll" });
  const detail = h("section", { id: "schedule-detail", class: "card wide", hidden: true });
  root.append(h("h1", null, "Schedules"), form,
    h("section", { class: "card wide" }, status, list,
      h("p", { class: "muted small" }, `Times are in ${zoneName()}; each schedule's own zone is in its detail.`)),
    detail);
  let lastList = "";
  let lastDetail = "";

  function share() {
    ctx.setParams("schedules", { queue: st.queue, key: st.key });
  }

  function say(text, ok) {
    replace(status, text);
    status.className = ok ? "ok" : "error";
  }

  async function act(action, key) {
    const what = { pause: "Pause", resume: "Resume", run: "Run now" }[action];
    const text = {
      pause: "Its pending occurrence is withdrawn; resume stages it again (the catch-up policy decides if it has passed).",
      resume: "Its kept occurrence is staged again.",
      run: "One extra occurrence is delivered now; the cadence does not move.",
    }[action];
    const ok = await confirmAction({ title: `${what}: “${key}”?`, text, extra: h("p", null, `Queue ${st.queue}`), ok: what });
    if (!ok) return;
    try {
      const res = await call("POST", `/api/v1/schedules/${encodeURIComponent(st.queue)}/${action}`, { body: { scheduleKey: key } });
      say(action === "run" ? `run now: ${key} at ${res.runAt}` : `${res.paused ? "paused" : "resumed"}: ${key}`, true);
    } catch (err) {
      say(errorText(err), false);
    }
    lastList = "";
    lastDetail = "";
    await refresh();
  }

  function buttons(s) {
    return [
      s.paused
        ? h("button", { type: "button", class: "resume", onclick: () => act("resume", s.scheduleKey) }, "Resume…")
        : h("button", { type: "button", class: "pause", onclick: () => act("pause", s.scheduleKey) }, "Pause…"),
      h("button", { type: "button", class: "run", onclick: () => act("run", s.scheduleKey) }, "Run now…"),
    ];
  }

  function row(s) {
    return h("tr", { dataset: { key: s.scheduleKey } },
      h("td", { class: "key", "data-label": "Schedule" }, shown(s.scheduleKey)),
      h("td", { "data-label": "Cadence" }, cadence(s), h("br"), h("span", { class: "muted" }, s.zone)),
      h("td", { class: "state", "data-label": "State" }, s.paused ? "paused" : "active"),
      h("td", { class: "next", "data-label": "Next" }, s.nextAt ? [absolute(s.nextAt), h("br"), h("span", { class: "muted" }, relative(s.nextAt))] : "–"),
      h("td", { "data-label": "Catch-up" }, s.catchUp === "all" ? `all (cap ${s.catchUpCap})` : s.catchUp),
      h("td", null, h("button", { type: "button", class: "detail", onclick: () => { st.key = s.scheduleKey; share(); lastDetail = ""; refresh(); } }, "Detail"), buttons(s)));
  }

  function showDetail(s) {
    detail.hidden = false;
    const field = (label, v) => [h("dt", null, label), h("dd", null, v === null || v === undefined ? "–" : v)];
    replace(detail, h("h2", null, "Schedule ", h("code", null, shown(s.scheduleKey))),
      h("dl", { class: "fields" },
        field("Cadence", cadence(s)), field("Zone", s.zone), field("State", s.paused ? "paused" : "active"),
        field("Jitter", `${fmtInt(s.jitterMs)} ms`), field("Catch-up", s.catchUp), field("Generation", s.generation),
        field("Starts", s.startAt && absolute(s.startAt)), field("Ends", s.endAt && absolute(s.endAt))),
      h("div", { class: "toolbar" }, buttons(s)),
      h("h3", null, "Next occurrences"),
      (s.next || []).length
        ? h("table", { class: "grid", id: "schedule-next" },
          h("thead", null, h("tr", null, ["UTC", `Local (${s.zone})`, "Due (with jitter)"].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", null, s.next.map((o) => h("tr", null, h("td", null, o.at), h("td", { class: "local" }, o.local), h("td", null, o.dueAt)))))
        : h("p", { class: "muted", id: "schedule-no-next" }, s.paused ? "Paused: nothing is pending." : "No next occurrence."),
      h("h3", null, "Last runs"),
      (s.runs || []).length
        ? h("table", { class: "grid", id: "schedule-runs" },
          h("thead", null, h("tr", null, ["Occurrence", "Kind", "Outcome", "Fired", "Late"].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", null, s.runs.map((r) => h("tr", { dataset: { outcome: r.outcome } },
            h("td", null, absolute(r.occurrenceAt)), h("td", null, r.kind), h("td", { class: "outcome" }, r.outcome),
            h("td", null, absolute(r.firedAt)), h("td", { class: "num late" }, `${fmtInt(Math.round(r.lateMs))} ms`)))))
        : h("p", { class: "muted", id: "schedule-no-runs" }, "No run yet."),
      h("button", { type: "button", onclick: () => { st.key = ""; share(); detail.hidden = true; } }, "Close"));
  }

  async function refresh() {
    if (!st.queue) {
      replace(list, h("p", { class: "muted" }, "Pick a queue."));
      return;
    }
    try {
      const doc = await call("GET", `/api/v1/schedules/${encodeURIComponent(st.queue)}`, { query: { limit: PAGE } });
      const key = JSON.stringify(doc);
      if (key !== lastList) {
        lastList = key;
        st.rows = doc.schedules || [];
        replace(list, st.rows.length
          ? h("table", { class: "grid cards-narrow", id: "schedules-table" },
            h("thead", null, h("tr", null, ["Schedule", "Cadence", "State", "Next", "Catch-up", ""].map((c) => h("th", { scope: "col" }, c)))),
            h("tbody", null, st.rows.map(row)))
          : h("p", { class: "muted", id: "schedules-empty" }, "No schedules on this queue."));
      }
      if (st.key && pathSafe(st.key)) {
        const path = `/api/v1/schedules/${encodeURIComponent(st.queue)}/${keyPath(st.key)}`;
        const one = await call("GET", path, { query: { count: 5, runs: 20 } });
        const k = JSON.stringify(one);
        if (k !== lastDetail) {
          lastDetail = k;
          showDetail(one);
        }
      }
    } catch (err) {
      lastList = "";
      replace(list, errorBox(err));
    }
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    st.queue = queueInput.value.trim();
    st.key = "";
    detail.hidden = true;
    share();
    lastList = "";
    refresh();
  });
  return { refresh };
}
