// Overview: every queue's pending timers and when they fall due, what is late or backing off,
// dead letters; this broker's fire rate and lag; the brokers alive; the two kill switches.
import { call } from "../api.js";
import { confirmAction } from "../dialog.js";
import { errorBox, errorText, fmtInt, h, replace } from "../dom.js";
import { duration } from "../time.js";

const SWITCHES = [
  { key: "timersSchedule", field: "timersScheduleEnabled", label: "Scheduling" },
  { key: "timersFire", field: "timersFireEnabled", label: "Fire" },
];

function ms(v) {
  return v === null || v === undefined ? "–" : duration(v);
}

function lag(v) {
  return v === null || v === undefined ? "–" : `${Number(v).toFixed(1)} ms`;
}

function stat(label, value, field) {
  return h("div", { class: "stat" }, h("span", { class: "label" }, label),
    h("span", { class: "value", dataset: { field } }, value));
}

function queueRow(q) {
  const t = q.timers || {};
  const link = `#/queue?name=${encodeURIComponent(q.name)}`;
  const late = t.oldestOverdueMs;
  return h(
    "tr",
    { dataset: { queue: q.name } },
    h("th", { scope: "row" }, h("a", { href: link }, q.name)),
    h("td", { class: "num", "data-label": "Pending", dataset: { field: "pending" } }, fmtInt(t.pending)),
    h("td", { class: "num", "data-label": "Due 1 min", dataset: { field: "dueNextMinute" } }, fmtInt(t.dueNextMinute)),
    h("td", { class: "num", "data-label": "Due 1 h", dataset: { field: "dueNextHour" } }, fmtInt(t.dueNextHour)),
    h("td", { class: "num", "data-label": "Due 1 day", dataset: { field: "dueNextDay" } }, fmtInt(t.dueNextDay)),
    h("td", { class: t.overdue ? "num warn" : "num", "data-label": "Overdue", dataset: { field: "overdue" } },
      fmtInt(t.overdue)),
    h("td", { class: late ? "num warn" : "num", "data-label": "Oldest overdue", dataset: { field: "oldestOverdue" } },
      late === null || late === undefined ? "–" : `${duration(late)} late`),
    h("td", { class: t.backingOff ? "num warn" : "num", "data-label": "Backing off", dataset: { field: "backingOff" } },
      // Their last errors are on the queue's rows.
      t.backingOff ? h("a", { href: link, title: "see their last errors" }, fmtInt(t.backingOff)) : fmtInt(t.backingOff)),
    h("td", { class: "num", "data-label": "Claimed", dataset: { field: "claimed" } }, fmtInt(t.claimed)),
    h("td", { class: q.deadLetters ? "num warn" : "num", "data-label": "Dead letters", dataset: { field: "deadLetters" } },
      q.deadLetters
        ? h("a", { href: `#/dlq?queue=${encodeURIComponent(q.name)}` }, fmtInt(q.deadLetters))
        : fmtInt(q.deadLetters)),
  );
}

function queuesTable(queues) {
  if (!queues.length) return h("p", { class: "muted", id: "no-queues" }, "No queues or timers yet.");
  const head = ["Queue", "Pending", "Due 1 min", "Due 1 h", "Due 1 day", "Overdue",
    "Oldest overdue", "Backing off", "Claimed", "Dead letters"];
  return h("div", { class: "scroll" }, h("table", { id: "queues", class: "grid cards-narrow" },
    h("thead", null, h("tr", null, head.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", null, queues.map(queueRow))));
}

export function mount(root, _params, ctx) {
  const brokerBox = h("section", { class: "card", id: "this-broker" });
  const clusterBox = h("section", { class: "card", id: "cluster" });
  const switchBox = h("section", { class: "card", id: "switches" });
  const queuesBox = h("section", { class: "card wide", id: "queues-card" });
  const switchMsg = h("p", { id: "switch-message", role: "status" });
  root.append(h("h1", null, "Overview"), h("div", { class: "cards" }, brokerBox, clusterBox,
    switchBox), queuesBox);
  let last = "";
  let switches = null;

  async function toggle(sw) {
    const enabled = switches[sw.field];
    const verb = enabled ? "Pause" : "Resume";
    const ok = await confirmAction({
      title: `${verb} ${sw.label.toLowerCase()}?`,
      text: enabled
        ? `Every broker stops ${sw.key === "timersFire" ? "firing due timers" : "accepting schedules"} within a second, until someone resumes it.`
        : `Every broker resumes ${sw.key === "timersFire" ? "firing due timers" : "accepting schedules"} within a second.`,
      ok: verb,
    });
    if (!ok) return;
    try {
      const res = await call("POST", "/api/v1/system/kv-timers", { body: { [sw.key]: !enabled } });
      replace(switchMsg, res.message || `${sw.label} ${enabled ? "paused" : "resumed"}.`);
      switchMsg.className = "ok";
    } catch (err) {
      replace(switchMsg, errorText(err));
      switchMsg.className = "error";
    }
    last = "";
    await ctx.refresh();
  }

  function renderSwitches(sw) {
    switches = sw;
    replace(switchBox, h("h2", null, "Kill switches"),
      SWITCHES.map((d) => {
        const on = sw[d.field];
        return h("div", { class: "switch", dataset: { switch: d.key } },
          h("span", { class: "label" }, d.label),
          h("span", { class: on ? "pill ok" : "pill bad", dataset: { field: "state" } },
            on ? "enabled" : "paused"),
          h("button", { type: "button", class: on ? "danger" : "", onclick: () => toggle(d) },
            on ? "Pause" : "Resume"));
      }),
      switchMsg);
  }

  function renderOverview(ov) {
    const me = ov.thisBroker || {};
    replace(brokerBox, h("h2", null, "This broker"),
      stat(`Fired/s (last ${fmtInt(me.windowSeconds)} s)`,
        me.firedPerSec === undefined ? "–" : Number(me.firedPerSec).toFixed(2), "firedPerSec"),
      stat("Fire lag p50", lag(me.fireLagP50Ms), "fireLagP50"),
      stat("Fire lag p99", lag(me.fireLagP99Ms), "fireLagP99"));
    const brokers = ov.brokers || { alive: 0, list: [] };
    const t = ov.timers || {};
    replace(clusterBox, h("h2", null, "Cluster"),
      stat("Brokers alive", fmtInt(brokers.alive), "brokersAlive"),
      stat("Pending timers", fmtInt(t.pending), "pending"),
      stat("Overdue", fmtInt(t.overdue), "overdue"),
      stat("Oldest overdue", t.oldestOverdueMs ? `${ms(t.oldestOverdueMs)} late` : "–",
        "oldestOverdue"),
      stat("Dead letters", fmtInt(ov.deadLetters), "deadLetters"),
      h("ul", { class: "brokers" }, (brokers.list || []).map((b) =>
        h("li", null, `${b.applicationName || "broker"} · pid ${b.pid} · ${b.clientAddr || "local socket"}`))));
  }

  async function refresh() {
    const [ov, qs, sw] = await Promise.allSettled([
      call("GET", "/api/v1/resources/overview"),
      call("GET", "/api/v1/resources/queues"),
      call("GET", "/api/v1/system/kv-timers"),
    ]);
    const key = JSON.stringify([ov, qs, sw].map((r) => r.value || errorText(r.reason)));
    if (key === last) return;
    last = key;
    if (ov.status === "fulfilled") renderOverview(ov.value);
    else replace(brokerBox, h("h2", null, "This broker"), errorBox(ov.reason));
    if (ov.status === "rejected") replace(clusterBox);
    if (sw.status === "fulfilled") renderSwitches(sw.value);
    else replace(switchBox, h("h2", null, "Kill switches"), errorBox(sw.reason));
    if (qs.status === "fulfilled") {
      replace(queuesBox, h("h2", null, "Queues"), queuesTable(qs.value.queues || []));
    } else {
      replace(queuesBox, h("h2", null, "Queues"), errorBox(qs.reason));
    }
  }

  return { refresh };
}
