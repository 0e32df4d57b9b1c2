// The console's shell: the token, the router (the view and its parameters live in the URL
// hash, so a link can be shared) and the live refresh of the current view.
import * as api from "./api.js";
import { dialogOpen } from "./dialog.js";
import { errorText, replace } from "./dom.js";
import { parseRefresh } from "./refresh.js";
import * as dlq from "./views/dlq.js";
import * as overview from "./views/overview.js";
import * as queue from "./views/queue.js";
import * as schedules from "./views/schedules.js";
import * as webhooks from "./views/webhooks.js";

const VIEWS = { overview, queue, schedules, webhooks, dlq };
const state = { view: null, name: "", timer: null, busy: false };

export function route() {
  const raw = window.location.hash.replace(/^#\/?/, "");
  const [name, query] = raw.split("?", 2);
  return { name: VIEWS[name] ? name : "overview", params: new URLSearchParams(query || "") };
}

// Rewrites the hash without reloading the view (parameters the view already shows).
export function setParams(name, params) {
  const clean = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) clean.set(k, v);
  const qs = clean.toString();
  const hash = `#/${name}${qs ? `?${qs}` : ""}`;
  if (window.location.hash !== hash) history.replaceState(null, "", hash);
}

export function showBanner(text) {
  const el = document.getElementById("banner");
  if (!text) {
    el.hidden = true;
    replace(el);
    return;
  }
  replace(el, text);
  el.hidden = false;
}

function stamp() {
  const when = new Date().toLocaleTimeString();
  replace(document.getElementById("updated"), `updated ${when}`);
}

async function refresh() {
  if (!state.view || state.busy || dialogOpen()) return;
  state.busy = true;
  try {
    await state.view.refresh();
    stamp();
  } finally {
    state.busy = false;
  }
}

function mount() {
  const { name, params } = route();
  if (state.view && state.view.unmount) state.view.unmount();
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === name);
  }
  const root = replace(document.getElementById("view"));
  state.name = name;
  state.view = VIEWS[name].mount(root, params, { setParams, refresh, showBanner });
  refresh();
}

function schedule() {
  clearInterval(state.timer);
  const seconds = parseRefresh(new URLSearchParams(window.location.search).get("refresh"));
  const live = document.getElementById("live");
  live.dataset.seconds = String(seconds);  // the interval in force (tests read it)
  live.parentElement.title = seconds > 0 ? `refreshes every ${seconds} s` : "refresh off";
  if (seconds === 0) live.checked = false;
  if (live.checked && seconds > 0) state.timer = setInterval(refresh, seconds * 1000);
}

function tokenForm() {
  const input = document.getElementById("token-input");
  const shown = document.getElementById("token-state");
  const show = () => replace(shown, api.token() ? "token set for this tab" : "no token");
  document.getElementById("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    api.setToken(input.value.trim());
    input.value = "";
    show();
    showBanner("");
    mount();
  });
  document.getElementById("token-forget").addEventListener("click", () => {
    api.setToken("");
    show();
    mount();
  });
  show();
}

tokenForm();
api.onAuth((err) => showBanner(err ? `${errorText(err)}: type a token above.` : ""));
document.getElementById("live").addEventListener("change", schedule);
window.addEventListener("hashchange", mount);
schedule();
mount();
