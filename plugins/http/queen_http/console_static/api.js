// The broker's own JSON routes, called with the operator's bearer token. The token lives in
// sessionStorage: it is gone when the tab closes and no other tab or site can read it.
const TOKEN_KEY = "queen-console-token";

export class ApiError extends Error {
  constructor(status, doc) {
    const code = (doc && doc.error) || `http_${status}`;
    super((doc && doc.detail) || code);
    this.status = status;
    this.code = code;
    this.reason = (doc && doc.reason) || "";
    this.detail = (doc && doc.detail) || "";
  }
}

// The shell's hook: told of every 401 (the token is missing or refused) and of every answer
// that passed authentication, so it can say so once for the whole page.
let authListener = () => {};

export function onAuth(fn) {
  authListener = fn;
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// One call: `query` becomes the query string (empty values left out), `body` a JSON body.
// Mutations always carry a JSON body or none, never a form: the broker refuses anything else.
export async function call(method, path, { query, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
  }
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const init = { method, headers, credentials: "omit", cache: "no-store", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(url, init);
  if (resp.status === 204) {
    authListener(null);
    return null;
  }
  const type = resp.headers.get("Content-Type") || "";
  const doc = type.startsWith("application/json") ? await resp.json() : await resp.text();
  const err = resp.ok ? null : new ApiError(resp.status, typeof doc === "object" ? doc : null);
  if (resp.status === 401) authListener(err);
  else if (resp.ok) authListener(null);
  if (err) throw err;
  return doc;
}

export const enc = encodeURIComponent;

// A timer key may hold '/', which the routes take literally (a catch-all segment).
export function keyPath(key) {
  return key.split("/").map(enc).join("/");
}

// Whether the key survives as a URL path: a browser folds "." and ".." segments (escaped or
// not) before it sends the request, so such a key is addressed through a JSON body instead.
export function pathSafe(key) {
  return !key.split("/").some((seg) => /^(\.|%2e){1,2}$/i.test(seg));
}
