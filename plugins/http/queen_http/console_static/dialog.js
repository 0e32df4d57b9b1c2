// A confirm dialog that names what is about to happen; resolves true only on Confirm.
import { replace } from "./dom.js";

let open = false;

export function dialogOpen() {
  return open;
}

export function confirmAction({ title, text, extra = null, ok = "Confirm" }) {
  const dlg = document.getElementById("confirm");
  replace(document.getElementById("confirm-title"), title);
  replace(document.getElementById("confirm-text"), text);
  replace(document.getElementById("confirm-extra"), extra);
  replace(document.getElementById("confirm-ok"), ok);
  open = true;
  dlg.returnValue = "";
  dlg.showModal();
  return new Promise((resolve) => {
    dlg.addEventListener(
      "close",
      () => {
        open = false;
        resolve(dlg.returnValue === "ok");
      },
      { once: true },
    );
  });
}
