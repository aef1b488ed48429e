// Shared page behaviour: sign-out, auto-submitting pickers, toasts, JSON fetch helper.
import { readableError } from "./error_text.js";

export function toast(text, kind = "info", ms = 4000) {
  const box = document.getElementById("toasts");
  if (!box) return;
  const el = document.createElement("div");
  el.className = `toast toast-${kind}`;
  el.textContent = text;
  box.append(el);
  setTimeout(() => el.remove(), ms);
}

// Same-origin JSON request; credentials always sent (seed W1). Returns {ok, status, body}.
export async function api(method, url, body) {
  const init = { method, credentials: "include", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(url, init);
  } catch (err) {
    return { ok: false, status: 0, body: { error: "network error" } };
  }
  let parsed = null;
  try { parsed = await res.json(); } catch { parsed = null; }
  return { ok: res.ok, status: res.status, body: parsed };
}

export function errorText(result) {
  // The API's "field: message" as a sentence, by the templates' rule (web/error_text.py).
  return readableError((result.body && result.body.error) || `request failed (${result.status})`);
}

document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-action='sign-out']");
  if (!button) return;
  await api("POST", "/api/v1/auth/logout");
  location.href = "/login";
});

for (const form of document.querySelectorAll("form[data-autosubmit]")) {
  form.addEventListener("change", (event) => {
    // A new workspace means a new workflow list: drop the old workflow choice.
    if (event.target.name === "workspace") form.querySelector("select[name=workflow]")?.remove();
    form.submit();
  });
}
