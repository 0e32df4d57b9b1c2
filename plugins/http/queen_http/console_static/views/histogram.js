// "When it fires": pending timers of one queue by due time, as a hand-written SVG bar chart.
// Overdue timers (due before now) get their own highlighted bar at the left, timers due past
// the window one at the right, so nothing pending is left out of the picture. With a key
// prefix the counts are of the keys that start with it (the page's filter).
import { countTicks, timeTicks } from "../axis.js";
import { fmtInt, h, s, shown } from "../dom.js";
import { duration } from "../time.js";

const W = 720;
const H = 200;
const PAD = { left: 44, right: 8, top: 12, bottom: 34 };
const EDGE = 34; // width of the overdue and "later" bars
const GAP = 10;

// The axis labels' font in viewBox units (console.css: 11 px, 20 at the narrow layout, where
// the chart is drawn at about half its size) and the width of a character in that font, an
// estimate for digits and letters of a sans-serif face (checked in the screenshots).
export const NARROW = "(max-width: 640px)"; // console.css's narrow layout
const CHAR_EM = 0.6;
const LABEL_GAP = 12;

function timeLabel(ms, kind, midnight) {
  const d = new Date(ms);
  if (kind === "days" || midnight) return d.toLocaleDateString(undefined, { month: "short", day: "numeric" });
  if (kind === "seconds") return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}

// The zone's offset at `ms` in ms east of UTC (getTimezoneOffset counts west, in minutes).
function offsetAt(ms) {
  return -new Date(ms).getTimezoneOffset() * 60000;
}

function bar(x, w, count, top, attrs, label) {
  const plot = H - PAD.top - PAD.bottom;
  // Height in proportion to the count (the scale's top covers every bar, the edge ones too);
  // a bar of one stays visible (2 units) under a top of thousands.
  const hgt = count === 0 ? 0 : Math.max(2, (count / top) * plot);
  return s("g", null,
    s("rect", { x, y: H - PAD.bottom - hgt, width: Math.max(w, 1), height: hgt, ...attrs },
      s("title", null, label)),
    // A transparent full-height target so a thin bar still shows its tooltip on hover.
    s("rect", { x, y: PAD.top, width: Math.max(w, 1), height: plot, class: "hit" },
      s("title", null, label)));
}

function edgeCount(x, count, top, cls) {
  const plot = H - PAD.top - PAD.bottom;
  const y = H - PAD.bottom - (count / top) * plot - 4;
  return s("text", { x, y: Math.max(y, PAD.top + 10), class: `axis count ${cls}`, "text-anchor": "middle" },
    count ? fmtInt(count) : "");
}

// As many time ticks as their labels fit side by side in `width` units: fewer when the labels
// are long ("12:30 PM") or the layout narrow. A step's kind sets the labels' length, so the
// fit is tried again, at most a few times, until the ticks it gives fit.
function fittedTimeTicks(from, to, width) {
  const font = window.matchMedia && window.matchMedia(NARROW).matches ? 20 : 11;
  let most = 12;
  for (let tries = 0; ; tries += 1) {
    const t = timeTicks(from, to, most, offsetAt(from));
    const longest = Math.max(1, ...t.ticks.map(({ at, midnight }) => timeLabel(at, t.kind, midnight).length));
    const labelWidth = longest * font * CHAR_EM;
    const fit = Math.max(2, Math.floor(width / (labelWidth + LABEL_GAP)));
    if (t.ticks.length <= fit || tries >= 4) return { ...t, labelWidth };
    most = fit;
  }
}

export function chart(doc) {
  const buckets = doc.buckets || [];
  const counts = buckets.map((b) => b.count);
  // One scale for every bar, the overdue and later ones too: a bar of 3 is three times a bar
  // of 1 wherever they stand.
  const y = countTicks(Math.max(0, doc.overdue || 0, doc.later || 0, ...counts));
  const top = y.top;
  const x0 = PAD.left + EDGE + GAP;
  const x1 = W - PAD.right - EDGE - GAP;
  const bw = buckets.length ? (x1 - x0) / buckets.length : 0;
  const span = duration(doc.bucketMs || 0);
  const what = doc.prefix ? ` with keys starting with ${doc.prefix}` : "";
  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "histogram", role: "img", id: "histogram-svg",
    "data-window": doc.window, "data-bucket-ms": doc.bucketMs, "data-top": top,
    "data-prefix": doc.prefix || "",
    "aria-label": `pending timers of ${doc.queue}${what} by due time`,
  });
  const plot = H - PAD.top - PAD.bottom;
  for (const v of y.ticks) {
    const yy = H - PAD.bottom - (v / top) * plot;
    if (v > 0) svg.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: yy, y2: yy, class: "gridline" }));
    svg.append(s("text", { x: PAD.left - 6, y: yy + 4, class: "axis ytick", "text-anchor": "end", "data-value": v },
      fmtInt(v)));
  }
  svg.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom, class: "baseline" }));
  svg.append(bar(PAD.left, EDGE, doc.overdue || 0, top,
    { class: "bar overdue", "data-bucket": "overdue", "data-count": doc.overdue || 0 },
    `${fmtInt(doc.overdue || 0)} overdue (due before now)`));
  svg.append(s("text", { x: PAD.left + EDGE / 2, y: H - PAD.bottom + 14, class: "axis overdue-label", "text-anchor": "middle" }, "late"));
  svg.append(edgeCount(PAD.left + EDGE / 2, doc.overdue || 0, top, "overdue-label"));
  buckets.forEach((b, i) => {
    svg.append(bar(x0 + i * bw, bw - (bw > 4 ? 1 : 0), b.count, top,
      { class: "bar", "data-bucket": i, "data-start": b.start, "data-count": b.count },
      `${fmtInt(b.count)} due in the ${span} from ${new Date(b.start).toLocaleString()}`));
  });
  // The time axis: instants on round local times (axis.js), each placed where it falls.
  const from = Date.parse(doc.from);
  const to = Date.parse(doc.to);
  if (buckets.length && to > from) {
    const t = fittedTimeTicks(from, to, x1 - x0);
    for (const { at, midnight } of t.ticks) {
      const x = x0 + ((at - from) / (to - from)) * (x1 - x0);
      svg.append(s("line", { x1: x, x2: x, y1: H - PAD.bottom, y2: H - PAD.bottom + 4, class: "baseline" }));
      // A label centred on its tick; one that would cross an end of the axis (into the "late"
      // or "later" label) keeps its tick mark and leaves the label out.
      const half = t.labelWidth / 2;
      if (x - half < x0 - GAP / 2 || x + half > x1 + GAP / 2) continue;
      svg.append(s("text", { x, y: H - PAD.bottom + 16, class: "axis xtick", "text-anchor": "middle", "data-at": new Date(at).toISOString() },
        timeLabel(at, t.kind, midnight)));
    }
  }
  svg.append(bar(x1 + GAP, EDGE, doc.later || 0, top,
    { class: "bar later", "data-bucket": "later", "data-count": doc.later || 0 },
    `${fmtInt(doc.later || 0)} due after ${new Date(doc.to).toLocaleString()}`));
  svg.append(s("text", { x: x1 + GAP + EDGE / 2, y: H - PAD.bottom + 14, class: "axis", "text-anchor": "middle" }, "later"));
  svg.append(edgeCount(x1 + GAP + EDGE / 2, doc.later || 0, top, ""));
  const inWindow = counts.reduce((a, b) => a + b, 0);
  const summary = h("p", { class: "chart-summary", id: "histogram-summary" },
    h("span", { class: doc.overdue ? "warn" : "" }, `${fmtInt(doc.overdue || 0)} overdue`),
    ` · ${fmtInt(inWindow)} due in the window (bars of ${span}) · ${fmtInt(doc.later || 0)} later`,
    doc.prefix ? [" · keys starting with ", h("code", null, shown(doc.prefix))] : []);
  return h("div", { class: "chart" }, svg, summary);
}
