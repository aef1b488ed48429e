// The board: drag and drop between and within columns (POST /api/v1/tasks/{id}/move),
// and live cards from the event stream. Everything is delegated to the board element, so
// start-up cost does not grow with the number of cards.
import { api, errorText, toast } from "./app.js";
import { connectEvents, fetchFragment } from "./live.js";

const board = document.getElementById("board");

function cardsOf(list) { return [...list.querySelectorAll(":scope > .card")]; }
function listFor(stepId) { return board.querySelector(`.cards[data-step-id="${CSS.escape(stepId)}"]`); }

function refreshCounts() {
  let total = 0;
  for (const column of board.querySelectorAll(".column")) {
    const n = column.querySelectorAll(".card").length;
    total += n;
    column.querySelector("[data-count]").textContent = String(n);
    const hint = column.querySelector("[data-empty-hint]");
    if (hint) hint.hidden = n > 0;
    const wip = Number(column.dataset.wip || 0);
    column.querySelector(".wip")?.classList.toggle("wip-over", wip > 0 && n > wip);
  }
  const totalEl = document.getElementById("board-total");
  if (totalEl) totalEl.textContent = String(total);
  const nounEl = document.getElementById("board-total-noun");
  if (nounEl) nounEl.textContent = total === 1 ? "task" : "tasks";
}

// Mirror of the server's shift_positions_from: later cards make room at `position`.
function makeRoom(list, position, exceptId) {
  for (const card of cardsOf(list)) {
    if (card.dataset.taskId !== exceptId && Number(card.dataset.position) >= position) {
      card.dataset.position = String(Number(card.dataset.position) + 1);
    }
  }
}

function insertByPosition(list, card) {
  const position = Number(card.dataset.position);
  const before = cardsOf(list).find(
    (c) => c !== card && Number(c.dataset.position) > position,
  );
  list.insertBefore(card, before || null);
}

// --- drag and drop ---------------------------------------------------------------------

let drag = null; // {card, fromList, fromNext}

function clearIndicators() {
  board.querySelectorAll(".drop-before").forEach((el) => el.classList.remove("drop-before"));
  board.querySelectorAll(".drop-end").forEach((el) => el.classList.remove("drop-end"));
  board.querySelectorAll(".drop-target").forEach((el) => el.classList.remove("drop-target"));
}

function dropSlot(list, clientY) {
  // The card the dragged one will land before, or null for the end of the column.
  return cardsOf(list).find((c) => {
    if (drag && c === drag.card) return false;
    const box = c.getBoundingClientRect();
    return clientY < box.top + box.height / 2;
  }) || null;
}

if (board) {
  board.addEventListener("dragstart", (event) => {
    const card = event.target.closest(".card");
    if (!card) return;
    drag = { card, fromList: card.parentElement, fromNext: card.nextElementSibling };
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", card.dataset.taskId);
    requestAnimationFrame(() => card.classList.add("dragging"));
  });
  board.addEventListener("dragend", () => {
    drag?.card.classList.remove("dragging");
    clearIndicators();
  });
  board.addEventListener("dragover", (event) => {
    const list = event.target.closest(".column")?.querySelector(".cards");
    if (!drag || !list) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    clearIndicators();
    list.closest(".column").classList.add("drop-target");
    const before = dropSlot(list, event.clientY);
    if (before) before.classList.add("drop-before"); else list.classList.add("drop-end");
  });
  board.addEventListener("drop", (event) => {
    const list = event.target.closest(".column")?.querySelector(".cards");
    if (!drag || !list) return;
    event.preventDefault();
    const before = dropSlot(list, event.clientY);
    clearIndicators();
    moveCard(drag, list, before);
    drag = null;
  });
}

async function moveCard({ card, fromList, fromNext }, list, before) {
  const others = cardsOf(list).filter((c) => c !== card);
  const position = before
    ? Number(before.dataset.position)
    : others.reduce((max, c) => Math.max(max, Number(c.dataset.position) + 1), 0);
  if (list === fromList && (before === fromNext || (before === null && fromNext === null))) {
    return; // dropped where it was
  }
  list.insertBefore(card, before); // optimistic
  card.classList.add("moving");
  refreshCounts();
  const result = await api("POST", `/api/v1/tasks/${card.dataset.taskId}/move`, {
    workflow_id: board.dataset.workflowId,
    workflow_step_id: list.dataset.stepId,
    position,
  });
  card.classList.remove("moving");
  if (!result.ok) {
    fromList.insertBefore(card, fromNext && fromNext.parentElement === fromList ? fromNext : null);
    refreshCounts();
    toast(`Move refused: ${errorText(result)}`, "error");
    card.dataset.moveError = errorText(result);
    return;
  }
  const task = result.body.task;
  if (task.workflow_step_id === list.dataset.stepId) {
    makeRoom(list, task.position, task.id);
    card.dataset.stepId = task.workflow_step_id;
    card.dataset.position = String(task.position);
  }
  placeCard(task);
  refreshCard(task.id);
}

// --- live cards ------------------------------------------------------------------------
// Placement (column and order) comes from the event's task JSON, at once; the card's content
// comes from its server-rendered fragment, GET /tasks/{id}/card, swapped in by htmx.

const inflight = new Map(); // task id → {again: bool}

function placeCard(task) {
  const list = listFor(task.workflow_step_id);
  let card = document.getElementById(`task-${task.id}`);
  if (!list || task.archived_at) { card?.remove(); refreshCounts(); return null; }
  // Where the card is, not what its data says: a fragment rendered after a move may carry
  // the new step while it still sits in the old column.
  const moved = !card || card.parentElement !== list ||
    Number(card.dataset.position) !== task.position;
  if (!card) {
    card = document.createElement("li");
    card.className = "card";
    card.id = `task-${task.id}`;
    card.dataset.taskId = task.id;
    card.draggable = true;
    card.textContent = task.title;
  }
  if (moved) {
    makeRoom(list, task.position, task.id); // as the server did
    card.dataset.stepId = task.workflow_step_id;
    card.dataset.position = String(task.position);
    insertByPosition(list, card);
    refreshCounts();
  }
  return card;
}

async function swapFragment(card) {
  const url = `/tasks/${encodeURIComponent(card.dataset.taskId)}/card`;
  if (window.htmx) {
    let status = 200;
    const onError = (e) => { status = e.detail.xhr.status; };
    card.addEventListener("htmx:responseError", onError, { once: true });
    await window.htmx.ajax("GET", url, { target: card, swap: "outerHTML" });
    if (status === 404) card.remove();
    else followFragment(card.dataset.taskId);
    return;
  }
  const { status, element } = await fetchFragment(url); // htmx missing: same result
  if (status === 404) card.remove();
  else if (element) { card.replaceWith(element); followFragment(card.dataset.taskId); }
}

// A fragment is as fresh as the last event or fresher (one fetched before an event is
// fetched again after it): a card whose fragment names another step goes to that column.
function followFragment(taskId) {
  const card = document.getElementById(`task-${taskId}`);
  const list = card && listFor(card.dataset.stepId);
  if (!list || card.parentElement === list) return;
  insertByPosition(list, card);
  refreshCounts();
}

// Events that arrive together (a move sends task.updated and task.moved) cost one fetch.
const scheduled = new Set();
function refreshCard(taskId) {
  if (scheduled.has(taskId)) return;
  scheduled.add(taskId);
  setTimeout(() => { scheduled.delete(taskId); fetchCard(taskId); }, 0);
}

async function fetchCard(taskId) {
  const running = inflight.get(taskId);
  if (running) { running.again = true; return; }
  const state = { again: false };
  inflight.set(taskId, state);
  try {
    do {
      state.again = false;
      const card = document.getElementById(`task-${taskId}`);
      if (card) await swapFragment(card);
    } while (state.again);
  } finally {
    inflight.delete(taskId);
    refreshCounts();
    board.dataset.lastApplied = String(performance.now());
  }
}

const CARD_EVENTS = new Set(["task.created", "task.updated", "task.moved", "session.state_changed"]);

// --- the workflow itself ----------------------------------------------------------------
// A step renamed, added, deleted or reordered (workflow.updated of the shown workflow):
// the board is fetched again and its columns swapped in. Events arriving meanwhile are
// held and applied to the new columns (placing a card again is harmless).

let reloading = null; // null, or the events held while the board is refetched
let reloadAgain = false;

async function reloadBoard() {
  if (reloading) { reloadAgain = true; return; }
  reloading = [];
  try {
    do {
      reloadAgain = false;
      const query = new URLSearchParams({
        workspace: board.dataset.workspaceId, workflow: board.dataset.workflowId,
      });
      const res = await fetch(`/?${query}`, { credentials: "include" });
      if (res.status === 404) { showGone("This board no longer exists."); return; }
      if (!res.ok) continue;
      const fresh = new DOMParser().parseFromString(await res.text(), "text/html");
      const freshBoard = fresh.getElementById("board");
      if (!freshBoard || freshBoard.dataset.workflowId !== board.dataset.workflowId) {
        showGone("This workflow no longer exists.");
        return;
      }
      board.replaceChildren(...freshBoard.childNodes);
      board.setAttribute("aria-label", freshBoard.getAttribute("aria-label") || "");
      const steps = document.querySelector('#new-task-form select[name="workflow_step_id"]');
      const freshSteps = fresh.querySelector('#new-task-form select[name="workflow_step_id"]');
      if (steps && freshSteps) {
        const chosen = steps.value;
        steps.replaceChildren(...freshSteps.children);
        if ([...steps.options].some((o) => o.value === chosen)) steps.value = chosen;
      }
    } while (reloadAgain);
  } finally {
    const held = reloading || [];
    reloading = null;
    refreshCounts();
    board.dataset.columnsAt = String(performance.now());
    for (const event of held) onEvent(event);
  }
}

function showGone(text) {
  // The shown workflow or its workspace was deleted: say so, with a way out.
  if (document.getElementById("board-gone")) return;
  const notice = document.createElement("p");
  notice.id = "board-gone";
  notice.className = "alert alert-error";
  notice.setAttribute("role", "alert");
  const link = document.createElement("a");
  link.href = "/";
  link.textContent = "Open the board";
  notice.append(`${text} `, link);
  board.before(notice);
  board.classList.add("board-gone");
  board.setAttribute("aria-disabled", "true");
}

function onEvent(event) {
  if (reloading && !event.type.startsWith("workflow.") && !event.type.startsWith("workspace.")) {
    reloading.push(event);
    return;
  }
  if (event.type === "workflow.updated") {
    const wf = event.workflow;
    const option = wf && document.querySelector(`select[name="workflow"] option[value="${CSS.escape(wf.id)}"]`);
    if (option && wf.name) option.textContent = wf.name;
    if (wf?.id === board.dataset.workflowId) reloadBoard();
    return;
  }
  if (event.type === "workflow.deleted") {
    if (event.workflow_id === board.dataset.workflowId) showGone("This workflow was deleted.");
    return;
  }
  if (event.type === "workspace.deleted") {
    if (event.workspace_id === board.dataset.workspaceId) showGone("This workspace was deleted.");
    return;
  }
  if (event.type === "workspace.updated") {
    const ws = event.workspace;
    const option = ws && document.querySelector(`select[name="workspace"] option[value="${CSS.escape(ws.id)}"]`);
    if (option) option.textContent = ws.name;
    return;
  }
  const task = event.task;
  if (event.type === "task.deleted") {
    document.getElementById(`task-${event.task_id || task?.id}`)?.remove();
    refreshCounts();
    return;
  }
  let taskId = task?.id || event.task_id;
  if (event.type.startsWith("session.message.")) {
    const type = event.message?.type;
    if (type !== "clarification_request" && type !== "permission_request") return;
    taskId = event.message.task_id;
  } else if (!CARD_EVENTS.has(event.type)) {
    return;
  }
  if (!taskId) return;
  const at = performance.now();
  (window.__kandevEventAt ||= {})[taskId] ??= at; // first arrival per task (bench/bench_web.py)
  if (task) {
    if (task.workflow_id !== board.dataset.workflowId) {
      document.getElementById(`task-${taskId}`)?.remove();
      refreshCounts();
      return;
    }
    if (!placeCard(task)) return;
  } else if (!document.getElementById(`task-${taskId}`)) {
    return; // not on this board
  }
  refreshCard(taskId);
}

if (board) {
  connectEvents({
    lastEventId: board.dataset.lastEventId,
    onEvent,
    onReset: () => location.reload(),
    statusEl: document.getElementById("live-status"),
  });
}
document.body.dataset.ready = "1";
window.__kandevReadyAt = performance.now();
