// A queue picker: a select of the tenant's queues (those with a log or pending timers, from
// /api/v1/resources/queues), with "Other…" for a name the list does not hold (a queue with
// nothing in it yet, or a list the token may not read), which shows a text box.
import { call } from "./api.js";
import { h, replace } from "./dom.js";

export function queuePicker({ id, value, onPick }) {
  const select = h("select", { id: `${id}-pick`, "aria-label": "queue" });
  const input = h("input", { id, value, placeholder: "queue name", hidden: true });
  let names = [];

  function fill() {
    const current = input.value.trim();
    const known = new Set(names);
    const opts = [h("option", { value: "", disabled: true, selected: !current }, names.length ? "pick a queue" : "no queues yet")];
    for (const n of names) opts.push(h("option", { value: n, selected: n === current }, n));
    // A name typed or shared in a link that the list does not hold stays selected as itself.
    if (current && !known.has(current)) opts.push(h("option", { value: current, selected: true }, current));
    opts.push(h("option", { value: "", dataset: { other: "1" } }, "Other…"));
    replace(select, opts);
  }

  select.addEventListener("change", () => {
    if (select.selectedOptions[0] && select.selectedOptions[0].dataset.other) {
      input.hidden = false;
      input.value = "";
      input.focus();
      return;
    }
    input.hidden = true;
    input.value = select.value;
    onPick(select.value);
  });

  async function load() {
    try {
      const doc = await call("GET", "/api/v1/resources/queues");
      names = (doc.queues || []).map((q) => q.name);
    } catch {
      // The list is a convenience: "Other…" still takes any name.
      names = [];
    }
    fill();
  }

  input.value = value || "";
  fill();
  return {
    select,
    input,
    load,
    value: () => input.value.trim(),
    // Called once a typed name is shown: it joins the select as itself.
    settle: () => {
      input.hidden = true;
      fill();
    },
  };
}
