// A permission card's option buttons (templates/partials/_permission.html), decided over
// POST /api/v1/permissions/{pending_id}/respond — the task page and the inbox both use it.
// Without JavaScript the same card is a plain form posting to /permissions/{id}/respond-form.
import { api, errorText, toast } from "./app.js";

const VERB = { allowed: "Allowed", rejected: "Rejected" };

function optionName(form, optionId) {
  const button = [...form.querySelectorAll("button[name=option_id]")].find((b) => b.value === optionId);
  return button ? button.textContent.trim() : optionId;
}

// The settled card in place of the buttons (the server's re-render follows the event).
function settle(form, text) {
  const decision = document.createElement("div");
  decision.className = "perm-decision";
  decision.dataset.decision = "";
  decision.textContent = text;
  form.replaceWith(decision);
}

// Decide with the clicked option. Resolves to true when the request is settled (decided by
// this click or by someone else, or no longer open), false when it is still open (an error).
export async function decidePermission(form, optionId) {
  const buttons = [...form.querySelectorAll("button")];
  for (const b of buttons) b.disabled = true;
  const result = await api("POST", `/api/v1/permissions/${form.dataset.pendingId}/respond`, {
    option_id: optionId,
  });
  if (result.ok) {
    const { claimed, status, option_id: won } = result.body;
    const text = `${VERB[status] || status}: ${optionName(form, won)}`;
    if (!claimed) toast(`Someone else decided first: ${text}. Their decision stands.`, "info", 8000);
    settle(form, text);
    return true;
  }
  if (result.status === 409 || result.status === 404) {
    toast("This permission request is no longer open.", "info", 6000);
    settle(form, result.status === 409 ? "Expired" : "Gone");
    return true;
  }
  for (const b of buttons) b.disabled = false;
  toast(errorText(result), "error");
  return false;
}

// Route a card's submit (a click on an option button) to decidePermission.
export function onPermissionSubmit(root, settled) {
  root.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-permission-form]");
    if (!form) return;
    event.preventDefault();
    const optionId = event.submitter?.value;
    if (!optionId) return;
    if (await decidePermission(form, optionId)) settled?.(form);
  });
}
