// How often the open view refreshes: `?refresh=N` in the page's query, in seconds (0: never).
// A view's refresh is a few API calls, so the interval has a floor: one tab left open at
// `?refresh=0.001` would otherwise send some 200 calls a second. And a ceiling: setInterval
// runs a delay over 2^31 - 1 ms at once, which would turn a huge N into the same flood.
export const DEFAULT_REFRESH_S = 5;
export const MIN_REFRESH_S = 1;
export const MAX_REFRESH_S = 86400;

export function parseRefresh(raw) {
  if (raw === null || raw === undefined) return DEFAULT_REFRESH_S;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) return DEFAULT_REFRESH_S;
  if (n === 0) return 0;
  return Math.min(Math.max(n, MIN_REFRESH_S), MAX_REFRESH_S);
}
