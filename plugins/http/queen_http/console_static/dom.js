// The one way views build DOM: every string becomes a text node or an attribute value, never
// markup, so a timer key, queue name, payload or error message can only ever be shown.
const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) {
      if (typeof value !== "function") throw new Error(`handler ${name} must be a function`);
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function replace(el, ...children) {
  return append(clear(el), children);
}

export function errorText(err) {
  if (err && err.code) return `${err.code}${err.reason ? ` (${err.reason})` : ""}: ${err.detail}`;
  return String((err && err.message) || err);
}

export function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, errorText(err));
}

export function fmtInt(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
}

// Characters that show as nothing, as a blank or as a reordering of their neighbours: controls,
// bidirectional overrides and isolates, zero-width and other format characters, separators
// other than the plain space, surrogates, private and unassigned code points. Timer keys may
// hold them (queue names may not), and a key holding one must not look like another key.
const HIDDEN = /^(?:[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]|[^\S ])$/u;

// How a hidden character is written: \xNN, \uNNNN or \UNNNNNNNN, as the CLI writes it.
export function escapeChar(ch) {
  const cp = ch.codePointAt(0);
  const hex = cp.toString(16);
  if (cp < 0x100) return `\\x${hex.padStart(2, "0")}`;
  if (cp < 0x10000) return `\\u${hex.padStart(4, "0")}`;
  return `\\U${hex.padStart(8, "0")}`;
}

// A key (or any name a tenant chose) as nodes: its visible characters as text, each hidden one
// as its escape in a marked span (class "esc"), which no typed text can imitate.
export function shown(text) {
  const out = [];
  let run = "";
  for (const ch of String(text)) {
    if (!HIDDEN.test(ch)) {
      run += ch;
      continue;
    }
    if (run) out.push(run);
    run = "";
    const cp = ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    out.push(h("span", { class: "esc", title: `U+${cp}, shown escaped` }, escapeChar(ch)));
  }
  if (run) out.push(run);
  return out;
}
