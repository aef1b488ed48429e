// The task page: live conversation (SSE), composer, stop/cancel, stepper moves, and the
// clarification overlay component.
import { api, errorText, toast } from "./app.js";
import { ChangesPanel } from "./changes.js";
import { ClarificationOverlay } from "./clarification.js";
import { connectEvents, fetchFragment } from "./live.js";
import { onPermissionSubmit } from "./permission.js";

const panel = document.getElementById("task-panel");
const taskId = panel.dataset.taskId;
const data = JSON.parse(document.getElementById("session-data")?.textContent || "null");
const session = data ? { ...data.session } : null;
const conversation = document.getElementById("conversation");
const composer = document.getElementById("composer");
const TERMINAL = new Set(["COMPLETED", "FAILED", "CANCELLED"]);
const changesRoot = document.getElementById("changes-panel");
const changes = changesRoot ? new ChangesPanel(changesRoot, taskId) : null;

// --- clarification rows and the overlay ------------------------------------------------

const rows = new Map((data?.clarifications || []).map((m) => [m.id, m]));
const overlayRoot = document.getElementById("clarification");
const overlay = overlayRoot ? new ClarificationOverlay(overlayRoot, { scope: panel }) : null;
function refreshOverlay() {
  if (!overlay) return;
  overlay.update([...rows.values()], session);
  // The overlay shows the open bundle; its rows in the history are for pages without JS.
  for (const li of conversation.querySelectorAll(".qa-pending")) {
    li.hidden = overlay.open && li.dataset.pendingId === overlay.pendingId;
  }
}

overlayRoot?.addEventListener("clarification:resolved", async (event) => {
  const { messageIds, status, response } = event.detail;
  // Apply the resolution locally (the winner's answer when this tab lost: seed W3)...
  const answers = new Map((response?.answers || []).map((a) => [a.question_id, a]));
  for (const id of messageIds) {
    const row = rows.get(id);
    if (!row) continue;
    const qid = row.metadata.question_id;
    row.metadata = {
      ...row.metadata, status,
      response: status === "rejected"
        ? { rejected: true, reject_reason: response?.reject_reason || "" }
        : answers.get(qid) || row.metadata.response,
    };
    showAnswer(row);
  }
  refreshOverlay();
  // ...then re-render those rows from the server, which holds the truth.
  for (const id of messageIds) rerender(id);
});

function showAnswer(row) {
  const li = document.getElementById(`msg-${row.id}`);
  const slot = li?.querySelector("[data-answer]");
  if (!slot) return;
  li.dataset.status = row.metadata.status;
  li.className = `msg msg-agent qa qa-${row.metadata.status}`;
  li.querySelector(".qa-options")?.remove();
  slot.classList.remove("muted");
  slot.replaceChildren();
  const r = row.metadata.response || {};
  if (row.metadata.status === "rejected") { slot.textContent = "Skipped"; return; }
  const options = row.metadata.question?.options || [];
  const picked = options.filter((opt) => (r.selected_options || []).includes(opt.option_id));
  for (const opt of picked) {
    const label = document.createElement("span");
    label.className = "answer-label";
    label.textContent = opt.label || opt.option_id;
    slot.append(label, " ");
  }
  if (!picked.length && r.custom_text) {
    // Text only: say what it is rather than leave the ✓ with no label (as _message.html).
    const kind = document.createElement("span");
    kind.className = "answer-kind";
    kind.textContent = "Written answer";
    slot.append(kind);
  }
  if (r.custom_text) {
    const quote = document.createElement("blockquote");
    quote.className = "answer-text";
    quote.textContent = r.custom_text;
    slot.append(quote);
  }
}

// --- conversation ----------------------------------------------------------------------

function lastMessageId() {
  const items = conversation.querySelectorAll(":scope > [data-message-id]");
  return items.length ? items[items.length - 1].dataset.messageId : null;
}

function place(item) {
  const existing = document.getElementById(item.id);
  if (existing) { existing.replaceWith(item); return; }
  const error = document.getElementById("session-error");
  conversation.insertBefore(item, error);
  if (item.dataset.author === "user") conversation.querySelector(".msg-queued")?.remove();
}

const nearBottom = () =>
  conversation.scrollHeight - conversation.scrollTop - conversation.clientHeight < 120;
const stickToBottom = () => {
  const near = nearBottom();
  return () => { if (near) conversation.scrollTop = conversation.scrollHeight; };
};

// The list gets shorter when the overlay opens (it keeps the height its question needs): a
// list that showed its end keeps showing it, one scrolled back to read stays where it is.
if (conversation && "ResizeObserver" in window) {
  let atEnd = true;
  conversation.addEventListener("scroll", () => { atEnd = nearBottom(); }, { passive: true });
  new ResizeObserver(() => {
    if (atEnd) conversation.scrollTop = conversation.scrollHeight;
  }).observe(conversation);
}

let catchingUp = null;
let catchUpAgain = false;
async function catchUp() {
  // Fetch everything after the last rendered item, in order (coalesced).
  if (catchingUp) { catchUpAgain = true; return catchingUp; }
  catchingUp = (async () => {
    do {
      catchUpAgain = false;
      const after = lastMessageId();
      const url = `/sessions/${session.id}/messages-fragment?limit=200${after ? `&after=${after}` : ""}`;
      const { fragment } = await fetchFragment(url);
      const scroll = stickToBottom();
      for (const item of [...(fragment?.firstElementChild?.children || [])]) place(item);
      scroll();
    } while (catchUpAgain);
  })();
  try { await catchingUp; } finally { catchingUp = null; refreshOverlay(); }
}

const rerenderTimers = new Map();
function rerender(messageId, delay = 0) {
  // Re-render one item from the server (Markdown, tool status): the item after its predecessor.
  clearTimeout(rerenderTimers.get(messageId));
  rerenderTimers.set(messageId, setTimeout(async () => {
    rerenderTimers.delete(messageId);
    let li = document.getElementById(`msg-${messageId}`);
    if (!li) {
      await catchUp(); // the item itself is still on its way
      li = document.getElementById(`msg-${messageId}`);
      if (!li) return;
    }
    const prev = li.previousElementSibling?.closest("[data-message-id]");
    const url = `/sessions/${session.id}/messages-fragment?limit=1${prev ? `&after=${prev.dataset.messageId}` : ""}`;
    const { fragment } = await fetchFragment(url);
    const item = fragment?.firstElementChild?.firstElementChild;
    const current = document.getElementById(`msg-${messageId}`);
    if (item && current && item.id === current.id) current.replaceWith(item);
    else catchUp();
    refreshOverlay();
  }, delay));
}

function streamText(message) {
  // Show streamed text at once; the Markdown rendering follows shortly from the server.
  const li = document.getElementById(`msg-${message.id}`);
  if (!li) { rerender(message.id); return; }
  const body = li.querySelector(".md");
  if (body && (message.type === "message" || message.type === "thinking")) {
    li.classList.add("msg-streaming");
    body.textContent = message.content;
  }
  rerender(message.id, 150);
}

// --- session, task and events ----------------------------------------------------------

function setSessionState(state) {
  session.state = state;
  panel.dataset.sessionState = state;
  const label = document.getElementById("session-state");
  if (label) label.textContent = state;
  const tab = document.querySelector(`[data-session-tab="${session.id}"] [data-session-state-label]`);
  if (tab) tab.textContent = state.toLowerCase().replace(/_/g, " ");
  const box = document.getElementById("composer-text");
  if (box) box.disabled = TERMINAL.has(state);
}

async function showFailure(known) {
  const message = known || (await api("GET", `/api/v1/sessions/${session.id}`)).body?.error_message;
  if (!message || document.getElementById("session-error")) return;
  const li = document.createElement("li");
  li.className = "msg msg-error";
  li.id = "session-error";
  li.textContent = `Session failed: ${message}`;
  conversation.append(li);
}

function setTask(task) {
  document.getElementById("task-title").textContent = task.title;
  const chip = document.getElementById("task-state");
  // One colour per label (web/render.py activity_class): waiting for the human stands out.
  const key = task.task_pending_action ? "waiting" : task.state.toLowerCase();
  chip.className = `chip chip-state state-${key}`;
  // The words are the server's (web/render.py ACTIVITY_LABELS; "" = a pending action).
  const labels = JSON.parse(chip.dataset.labels || "{}");
  chip.textContent = labels[task.task_pending_action ? "" : task.state] || task.state;
  if (task.state === "IN_PROGRESS") {
    const spin = document.createElement("span");
    spin.className = "spinner";
    spin.setAttribute("aria-hidden", "true");
    chip.prepend(spin);
  }
  for (const li of document.querySelectorAll("#stepper li")) {
    if (li.dataset.stepId === task.workflow_step_id) li.setAttribute("aria-current", "step");
    else li.removeAttribute("aria-current");
  }
  let badge = document.getElementById("task-badge");
  if (task.task_pending_action && !badge) {
    badge = document.createElement("span");
    badge.id = "task-badge";
    badge.className = "badge badge-input";
    badge.textContent = "needs input";
    chip.after(badge);
  } else if (!task.task_pending_action) {
    badge?.remove();
  }
  const field = document.querySelector('[data-field="state"]');
  if (field) field.textContent = task.state;
  setDiffTotals(task);
}

function setDiffTotals(task) {
  // The header's +A −D (the task row's last computed totals, on `task.updated`); no chip
  // while the worktree has no changes (+0 −0), as the page renders it.
  if (!task.branch || task.additions == null) return;
  let diff = document.getElementById("task-diff");
  if (!task.additions && !task.deletions) { diff?.remove(); return; }
  if (!diff) {
    diff = document.createElement("span");
    diff.id = "task-diff";
    diff.className = "chip chip-diff";
    diff.title = "lines added / removed by the task's changes";
    document.querySelector(".title-row").append(diff);
  }
  diff.textContent = `+${task.additions} −${task.deletions}`;
}

function addSessionTab(created) {
  // A session started elsewhere (REST, MCP, another tab) gets its tab at once.
  const tabs = document.querySelector(".tabs");
  if (!tabs || tabs.querySelector(`[data-session-tab="${created.id}"]`)) return;
  const link = document.createElement("a");
  link.href = `/tasks/${taskId}?session=${created.id}`;
  link.dataset.sessionTab = created.id;
  const state = document.createElement("span");
  state.dataset.sessionStateLabel = "";
  state.textContent = created.state.toLowerCase().replace(/_/g, " ");
  link.append("new session · ", state);
  tabs.insertBefore(link, tabs.querySelector(".popover"));
}

function onEvent(event) {
  if (event.task && event.task.id === taskId) setTask(event.task);
  if (event.type === "task.changes_updated" && event.task_id === taskId) changes?.refresh();
  if (event.type === "session.created" && event.session?.task_id === taskId) {
    addSessionTab(event.session);
    if (!session) location.reload(); // the first session: show its conversation
    return;
  }
  if (!session) return;
  const message = event.message;
  if (message && message.session_id === session.id) {
    if (message.type === "clarification_request") {
      rows.set(message.id, message);
      refreshOverlay();
    }
    if (event.type === "session.message.added") catchUp();
    else if (event.type === "session.message.updated") streamText(message);
    return;
  }
  if (event.session_id !== session.id) return;
  if (event.type === "session.turn.started") {
    session.current_turn_id = event.turn_id;
    refreshOverlay();
  } else if (event.type === "session.state_changed") {
    if (event.session) Object.assign(session, event.session);
    setSessionState(event.state || session.state);
    if (!session.hint) document.getElementById("session-hint")?.remove();
    refreshOverlay();
    if (session.state === "FAILED") showFailure(event.error_message);
  }
}

connectEvents({
  params: { task_id: taskId },
  lastEventId: panel.dataset.lastEventId,
  onEvent,
  onReset: () => location.reload(),
});

// --- composer, stop, cancel, stepper ---------------------------------------------------

let sending = false;
async function sendPrompt() {
  const box = document.getElementById("composer-text");
  const text = box.value.trim();
  if (!text || sending) return;
  sending = true;
  const result = await api("POST", `/api/v1/sessions/${session.id}/prompt`, { text });
  sending = false;
  if (!result.ok) { toast(errorText(result), "error"); return; }
  box.value = "";
  if (result.body.queued) {
    const li = document.createElement("li");
    li.className = "msg msg-user msg-queued";
    li.dataset.queued = "1";
    li.textContent = text;
    conversation.append(li);
    conversation.scrollTop = conversation.scrollHeight;
  }
}

composer?.addEventListener("submit", (event) => { event.preventDefault(); sendPrompt(); });
document.getElementById("composer-text")?.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.isComposing) {
    event.preventDefault();
    sendPrompt();
  }
});

document.addEventListener("click", async (event) => {
  const action = event.target.closest("[data-action]")?.dataset.action;
  if (!session || (action !== "cancel-turn" && action !== "stop-session")) return;
  const path = action === "cancel-turn" ? "cancel" : "stop";
  const result = await api("POST", `/api/v1/sessions/${session.id}/${path}`, path === "stop" ? {} : undefined);
  if (!result.ok) toast(errorText(result), "error");
  else if (path === "stop" && result.body?.state) setSessionState(result.body.state);
  else toast("Turn cancelled");
});

document.getElementById("stepper")?.addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const result = await api("POST", `/api/v1/tasks/${taskId}/move`, {
    workflow_id: form.workflow_id.value,
    workflow_step_id: form.workflow_step_id.value,
  });
  if (!result.ok) { toast(`Move refused: ${errorText(result)}`, "error"); return; }
  setTask(result.body.task);
});

// A permission card's option buttons: decided over REST, then the card from the server.
if (conversation) {
  onPermissionSubmit(conversation, (form) => {
    const id = form.closest("[data-message-id]")?.dataset.messageId;
    if (id) rerender(id);
  });
}

refreshOverlay();
if (conversation) conversation.scrollTop = conversation.scrollHeight;
changes?.refresh();
document.body.dataset.ready = "1";
