// /inbox: each open question answerable in place through the task page's overlay
// (clarification.js), each permission request decided by its option buttons (permission.js);
// live through the one event stream: on a clarification event the
// list fragment is refetched and merged by pending id, so an item being answered keeps
// its state while new ones appear and settled ones disappear.
import { toast } from "./app.js";
import { ClarificationOverlay } from "./clarification.js";
import { connectEvents, fetchFragment } from "./live.js";
import { onPermissionSubmit } from "./permission.js";
import {
  affectsInbox, notificationsWanted, optInToNotifications, optOutOfNotifications, refreshCount,
} from "./badge.js";

const list = document.getElementById("inbox-list");
const overlays = new Map(); // pending_id → ClarificationOverlay
// What the overlay needs to know of the session: the inbox lists only active bundles.
const WAITING = { state: "WAITING_FOR_INPUT", current_turn_id: null };

function enhance(item) {
  if (item.dataset.enhanced || item.dataset.kind === "permission") return;
  let rows;
  try { rows = JSON.parse(item.querySelector("script[data-rows]").textContent); } catch { return; }
  const section = document.createElement("section");
  section.className = "clarify";
  section.setAttribute("role", "region");
  section.setAttribute("aria-label", "Clarification needed");
  section.hidden = true;
  item.append(section);
  const overlay = new ClarificationOverlay(section, { scope: item });
  overlay.update(rows, WAITING);
  overlays.set(item.dataset.pendingId, overlay);
  item.dataset.enhanced = "1";
  section.addEventListener("clarification:resolved", (event) => settled(item, event.detail));
}

// The winner's answer in words: option labels and quoted text, or "skipped" (W2/W3).
function describe(response, rows) {
  if (!response) return "";
  if (response.rejected) return "skipped";
  const labels = new Map();
  for (const row of rows) {
    for (const opt of row.metadata.question?.options || []) labels.set(opt.option_id, opt.label);
  }
  return (response.answers || []).map((a) => a.custom_text
    ? `“${a.custom_text}”`
    : (a.selected_options || []).map((id) => labels.get(id) || id).join(", ")).join("; ");
}

function settled(item, detail) {
  if (detail.claimed === false || detail.conflict) {
    let rows = [];
    try { rows = JSON.parse(item.querySelector("script[data-rows]").textContent); } catch { /* none */ }
    const winner = detail.claimed === false ? describe(detail.response, rows) : "";
    toast(winner
      ? `Someone else answered first: ${winner}. Their answer stands.`
      : "This question was already settled.", "info", 8000);
  }
  remove(item);
  refreshCount();
}

function remove(item) {
  overlays.get(item.dataset.pendingId)?.destroy();
  overlays.delete(item.dataset.pendingId);
  item.remove();
  updateChrome();
}

function updateChrome(more) {
  const count = list.querySelectorAll(".inbox-item").length;
  document.getElementById("inbox-total").textContent = String(count);
  document.getElementById("inbox-empty").hidden = count > 0;
  if (more !== undefined) document.getElementById("inbox-more")?.toggleAttribute("hidden", !more);
}

// Merge the server's list into the page: keep existing items (and what was typed in
// them), add new ones in the server's order, drop the ones no longer open.
function merge(fresh) {
  const incoming = [...fresh.querySelectorAll("#inbox-list > .inbox-item")];
  const wanted = new Set(incoming.map((el) => el.dataset.pendingId));
  for (const item of [...list.querySelectorAll(".inbox-item")]) {
    if (wanted.has(item.dataset.pendingId)) continue;
    const overlay = overlays.get(item.dataset.pendingId);
    if (overlay && overlay.answers.size > 0 && !overlay.submitting) {
      toast(`“${item.querySelector(".task-link")?.textContent}” was settled elsewhere.`, "info", 6000);
    }
    remove(item);
  }
  let previous = null;
  for (const el of incoming) {
    let item = document.getElementById(el.id);
    if (!item) {
      item = el;
      if (previous) previous.after(item); else list.prepend(item);
      enhance(item);
    }
    previous = item;
  }
  updateChrome(fresh.querySelector("#inbox-list")?.dataset.more === "true");
}

let loading = null;
let again = false;
async function refresh() {
  if (loading) { again = true; return; }
  loading = (async () => {
    do {
      again = false;
      const { element } = await fetchFragment("/inbox/list");
      if (element) merge(element);
    } while (again);
  })();
  try { await loading; } finally { loading = null; }
  refreshCount();
}

function setupNotifications() {
  const button = document.getElementById("notify-toggle");
  if (!button || !("Notification" in window)) return;
  const label = () => {
    button.textContent = notificationsWanted() ? "Notifications on" : "Notify me of new questions";
    button.setAttribute("aria-pressed", String(notificationsWanted()));
  };
  button.hidden = false;
  label();
  button.addEventListener("click", async () => {
    if (notificationsWanted()) optOutOfNotifications();
    else if ((await optInToNotifications()) === "denied") {
      toast("Notifications are blocked for this site in your browser settings.", "error");
    }
    label();
  });
}

list.querySelectorAll(".inbox-item").forEach(enhance);
onPermissionSubmit(list, (form) => {
  const item = form.closest(".inbox-item");
  if (item) setTimeout(() => { remove(item); refreshCount(); }, 600); // the decision, briefly
});
setupNotifications();
const source = connectEvents({
  statusEl: document.getElementById("live-status"),
  onEvent: (event) => { if (affectsInbox(event)) refresh(); },
  onReset: () => refresh(),
});
// A stream opened without Last-Event-ID starts at "now": whatever changed between rendering
// and (re)connecting is caught up by one refetch each time the stream opens.
source.addEventListener("open", () => refresh());
