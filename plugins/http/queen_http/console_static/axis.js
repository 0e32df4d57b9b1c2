// The chart's axes as arithmetic, without the DOM: which counts the y-axis labels and where its
// top is, and which instants the time axis labels and how. Pure functions of their arguments
// (the browser's zone comes in as an offset), unit-tested in plugins/http/tests.

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

// The y-axis of counts: ticks 0, step, 2 step ... top, every one an integer and no two alike,
// with top >= max and at most `most` steps. The step is 1, 2 or 5 times a power of ten, so a
// reader can add it up; a bar of n is n / top of the plot's height, so 3 is three times 1.
export function countTicks(max, most = 4) {
  const m = Math.max(0, Math.ceil(Number(max) || 0));
  if (m === 0) return { top: 1, step: 1, ticks: [0, 1] };
  let step = 1;
  for (let p = 1; ; p *= 10) {
    const fit = [1, 2, 5].map((f) => f * p).find((c) => Math.ceil(m / c) <= most);
    if (fit) {
      step = fit;
      break;
    }
  }
  const top = step * Math.ceil(m / step);
  const ticks = [];
  for (let v = 0; v <= top; v += step) ticks.push(v);
  return { top, step, ticks };
}

// Steps a time axis may use, with the label each needs: seconds for steps under a minute, the
// time of day under a day, the date from a day up. No step is more than 2.5 times the one
// before, so the step chosen never leaves a span with fewer than most / 2.5 ticks.
const TIME_STEPS = [
  [1 * SECOND, "seconds"], [2 * SECOND, "seconds"], [5 * SECOND, "seconds"],
  [10 * SECOND, "seconds"], [15 * SECOND, "seconds"], [30 * SECOND, "seconds"],
  [1 * MINUTE, "minutes"], [2 * MINUTE, "minutes"], [5 * MINUTE, "minutes"],
  [10 * MINUTE, "minutes"], [15 * MINUTE, "minutes"], [30 * MINUTE, "minutes"],
  [1 * HOUR, "minutes"], [2 * HOUR, "minutes"], [3 * HOUR, "minutes"], [6 * HOUR, "minutes"],
  [12 * HOUR, "minutes"],
  [1 * DAY, "days"], [2 * DAY, "days"], [3 * DAY, "days"], [7 * DAY, "days"],
  [14 * DAY, "days"], [30 * DAY, "days"], [60 * DAY, "days"], [91 * DAY, "days"],
  [182 * DAY, "days"], [365 * DAY, "days"],
];

// The time axis of [fromMs, toMs]: the smallest step of TIME_STEPS that labels at most `most`
// instants, and those instants: every multiple of the step in local time (offsetMs: the
// zone's offset from UTC, east positive), so hours fall on the hour and days on midnight.
// `kind` says how to write them (seconds: 14:05:30, minutes: 14:05, days: Dec 6). A tick at
// local midnight under a daily step is `midnight`, so the chart can name the new day.
export function timeTicks(fromMs, toMs, most = 8, offsetMs = 0) {
  const span = toMs - fromMs;
  if (!(span > 0)) return { step: 0, kind: "minutes", ticks: [] };
  const count = (step) => Math.floor((toMs + offsetMs) / step) - Math.ceil((fromMs + offsetMs) / step) + 1;
  const found = TIME_STEPS.find(([step]) => count(step) <= most) || TIME_STEPS[TIME_STEPS.length - 1];
  const [step, kind] = found;
  const ticks = [];
  for (let k = Math.ceil((fromMs + offsetMs) / step); k * step - offsetMs <= toMs; k += 1) {
    const at = k * step - offsetMs;
    ticks.push({ at, midnight: kind !== "days" && (at + offsetMs) % DAY === 0 });
  }
  return { step, kind, ticks };
}
