// The top bar's inbox badge on every page: the count the server rendered, refreshed from
// /inbox/count when an event says a question appeared or was settled (never on a timer),
// mirrored in the tab title as "(2) Kandev", and announced by a browser notification when
// the user opted in on /inbox. The inbox page drives the same functions from its own stream.
import { connectEvents, fetchFragment } from "./live.js";

const OPT_IN_KEY = "kandev.notify";
const baseTitle = document.title.replace(/^\(\d+\+?\) /, "");

// A clarification or permission row added or changed, or a session that changed state (its
// questions may have expired), can change the count.
export function affectsInbox(event) {
  if (event.type === "session.message.added" || event.type === "session.message.updated") {
    const type = event.message?.type;
    return type === "clarification_request" || type === "permission_request";
  }
  return event.type === "session.state_changed";
}

export function currentCount() {
  const badge = document.getElementById("inbox-badge");
  const value = Number(badge?.dataset.count);
  return Number.isFinite(value) ? value : 0;
}

export function showCount(count) {
  const badge = document.getElementById("inbox-badge");
  if (badge) {
    badge.dataset.count = String(count);
    badge.hidden = !count;
    badge.innerHTML = count
      ? `<span class="sr-only">, </span>${count}<span class="sr-only"> open</span>`
      : "";
  }
  document.title = count ? `(${count}) ${baseTitle}` : baseTitle;
}

export const notificationsWanted = () =>
  localStorage.getItem(OPT_IN_KEY) === "1" && "Notification" in window &&
  Notification.permission === "granted";

export async function optInToNotifications() {
  if (!("Notification" in window)) return "unsupported";
  const permission = await Notification.requestPermission();
  localStorage.setItem(OPT_IN_KEY, permission === "granted" ? "1" : "0");
  return permission;
}

export function optOutOfNotifications() { localStorage.setItem(OPT_IN_KEY, "0"); }

export function announce(count) {
  if (!notificationsWanted() || document.visibilityState === "visible" && location.pathname === "/inbox") return;
  try {
    const note = new Notification("An agent is waiting for you", {
      body: `${count} open question${count === 1 ? "" : "s"} in your Kandev inbox`,
      tag: "kandev-inbox",
    });
    note.onclick = () => { window.focus(); location.href = "/inbox"; };
  } catch { /* some browsers only notify from a service worker */ }
}

let inFlight = null;
let again = false;

// Refetch the count (coalesced: one request at a time, one more if events kept coming).
export async function refreshCount() {
  if (inFlight) { again = true; return inFlight; }
  inFlight = (async () => {
    do {
      again = false;
      const { element } = await fetchFragment("/inbox/count");
      if (!element) continue;
      const before = currentCount();
      const count = Number(element.dataset.count) || 0;
      showCount(count);
      if (count > before) announce(count);
    } while (again);
  })();
  try { await inFlight; } finally { inFlight = null; }
}

showCount(currentCount());
// The inbox page has its own stream and calls refreshCount itself.
if (!document.querySelector("[data-inbox]") && document.getElementById("inbox-badge")) {
  const source = connectEvents({
    onEvent: (event) => { if (affectsInbox(event)) refreshCount(); },
    onReset: () => refreshCount(),
  });
  // What changed between rendering and (re)connecting: one refetch whenever the stream opens.
  source.addEventListener("open", () => refreshCount());
}
