// Instants as the operator reads them: absolute in the browser's zone, and relative to now.
const UNITS = [
  ["d", 86400000],
  ["h", 3600000],
  ["min", 60000],
  ["s", 1000],
];

export function duration(ms) {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)} ms`;
  const parts = [];
  let rest = abs;
  for (const [unit, size] of UNITS) {
    if (rest >= size && parts.length < 2) {
      const n = Math.floor(rest / size);
      parts.push(`${n} ${unit}`);
      rest -= n * size;
    }
  }
  return parts.join(" ");
}

export function relative(iso, now = Date.now()) {
  const ms = Date.parse(iso) - now;
  return ms >= 0 ? `in ${duration(ms)}` : `${duration(ms)} late`;
}

// A backing-off timer's next attempt: its due time has passed, but it is not late, it waits.
export function retryRelative(iso, now = Date.now()) {
  const ms = Date.parse(iso) - now;
  return ms > 0 ? `retry in ${duration(ms)}` : "retry due";
}

export function ago(iso, now = Date.now()) {
  return `${duration(now - Date.parse(iso))} ago`;
}

export function absolute(iso) {
  const d = new Date(iso);
  return d.toLocaleString(undefined, {
    year: "numeric",
    month: "short",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
}

export function zoneName() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
}

// A <input type="datetime-local"> value (the browser's zone) as an ISO instant with offset.
export function localInputToIso(value) {
  if (!value) return "";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
}

export function isoToLocalInput(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}` +
    `T${pad(d.getHours())}:${pad(d.getMinutes())}`
  );
}
