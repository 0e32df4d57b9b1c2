// "When it fires": pending timers of one queue by due time, as a hand-written SVG bar chart.
// Overdue timers (due before now) get their own highlighted bar at the left, timers due past
// the window one at the right, so nothing pending is left out of the picture.
import { fmtInt, h, s } from "../dom.js";
import { duration } from "../time.js";

const W = 720;
const H = 200;
const PAD = { left: 44, right: 8, top: 12, bottom: 34 };
const EDGE = 34; // width of the overdue and "later" bars
const GAP = 10;

function tick(iso, window) {
  const d = new Date(iso);
  if (window === "hour") return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  if (window === "day") return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  return d.toLocaleDateString(undefined, { month: "short", day: "numeric" });
}

function bar(x, w, count, max, attrs, label) {
  const plot = H - PAD.top - PAD.bottom;
  // An edge bar may count more than the scale (which follows the window's own bars): it is
  // drawn full height and says its count in a label.
  const hgt = count === 0 ? 0 : Math.max(2, Math.min(count / max, 1) * plot);
  return s("g", null,
    s("rect", { x, y: H - PAD.bottom - hgt, width: Math.max(w, 1), height: hgt, ...attrs },
      s("title", null, label)),
    // A transparent full-height target so a thin bar still shows its tooltip on hover.
    s("rect", { x, y: PAD.top, width: Math.max(w, 1), height: plot, class: "hit" },
      s("title", null, label)));
}

function edgeCount(x, count, max, cls) {
  const plot = H - PAD.top - PAD.bottom;
  const y = H - PAD.bottom - Math.min(count / max, 1) * plot - 4;
  return s("text", { x, y: Math.max(y, PAD.top + 10), class: `axis count ${cls}`, "text-anchor": "middle" },
    count ? fmtInt(count) : "");
}

export function chart(doc) {
  const buckets = doc.buckets || [];
  const counts = buckets.map((b) => b.count);
  // The scale follows the window's buckets, so one tall edge bar cannot flatten them.
  const max = Math.max(1, ...counts);
  const x0 = PAD.left + EDGE + GAP;
  const x1 = W - PAD.right - EDGE - GAP;
  const bw = buckets.length ? (x1 - x0) / buckets.length : 0;
  const span = duration(doc.bucketMs || 0);
  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "histogram", role: "img", id: "histogram-svg",
    "data-window": doc.window, "data-bucket-ms": doc.bucketMs,
    "aria-label": `pending timers of ${doc.queue} by due time`,
  });
  // Grid lines at a half and the full height, labelled with the count.
  const plot = H - PAD.top - PAD.bottom;
  for (const f of [0.5, 1]) {
    const y = H - PAD.bottom - f * plot;
    svg.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: y, y2: y, class: "gridline" }),
      s("text", { x: PAD.left - 6, y: y + 4, class: "axis", "text-anchor": "end" },
        fmtInt(Math.round(f * max))));
  }
  svg.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom, class: "baseline" }));
  svg.append(bar(PAD.left, EDGE, doc.overdue || 0, max,
    { class: "bar overdue", "data-bucket": "overdue", "data-count": doc.overdue || 0 },
    `${fmtInt(doc.overdue || 0)} overdue (due before now)`));
  svg.append(s("text", { x: PAD.left + EDGE / 2, y: H - PAD.bottom + 14, class: "axis overdue-label", "text-anchor": "middle" }, "late"));
  svg.append(edgeCount(PAD.left + EDGE / 2, doc.overdue || 0, max, "overdue-label"));
  buckets.forEach((b, i) => {
    svg.append(bar(x0 + i * bw, bw - (bw > 4 ? 1 : 0), b.count, max,
      { class: "bar", "data-bucket": i, "data-start": b.start, "data-count": b.count },
      `${fmtInt(b.count)} due in the ${span} from ${new Date(b.start).toLocaleString()}`));
  });
  // Start, middle and end of the window, anchored inwards so they clear the edge labels.
  const ticks = buckets.length
    ? [[0, "start"], [Math.floor(buckets.length / 2), "middle"], [buckets.length, "end"]]
    : [];
  for (const [i, anchor] of ticks) {
    const at = i < buckets.length ? buckets[i].start : doc.to;
    svg.append(s("text", { x: x0 + i * bw, y: H - PAD.bottom + 14, class: "axis", "text-anchor": anchor },
      tick(at, doc.window)));
  }
  svg.append(bar(x1 + GAP, EDGE, doc.later || 0, max,
    { class: "bar later", "data-bucket": "later", "data-count": doc.later || 0 },
    `${fmtInt(doc.later || 0)} due after ${new Date(doc.to).toLocaleString()}`));
  svg.append(s("text", { x: x1 + GAP + EDGE / 2, y: H - PAD.bottom + 14, class: "axis", "text-anchor": "middle" }, "later"));
  svg.append(edgeCount(x1 + GAP + EDGE / 2, doc.later || 0, max, ""));
  const inWindow = counts.reduce((a, b) => a + b, 0);
  const summary = h("p", { class: "chart-summary", id: "histogram-summary" },
    h("span", { class: doc.overdue ? "warn" : "" }, `${fmtInt(doc.overdue || 0)} overdue`),
    ` · ${fmtInt(inWindow)} due in the window (bars of ${span}) · ${fmtInt(doc.later || 0)} later`);
  return h("div", { class: "chart" }, svg, summary);
}
