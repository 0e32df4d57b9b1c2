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
