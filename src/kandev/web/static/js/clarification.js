// The clarification overlay: a reusable component for any page that shows a conversation
// (the task page today, /inbox later). It renders into a server partial
// (templates/partials/_clarification.html), is given the bundle rows (message JSON of type
// clarification_request) and answers through POST /api/v1/clarification/{id}/respond.
//
//   const overlay = new ClarificationOverlay(sectionEl, { scope: panelEl });
//   overlay.update(rows, { state, current_turn_id });   // whenever rows or the session change
//   sectionEl.addEventListener("clarification:resolved", (e) => …e.detail…);
//
// Behaviour follows the original web UI: an arrival gate (nothing until every question of
// the bundle arrived), one card at a time with a stepper, shared context once, options as
// toggle buttons (number keys), a "Your answer" box counting runes up to 2000, Submit when
// every question is answered, Skip all, Escape/collapse as a local dismiss that never answers,
// one request in flight, shortcuts only while focus is inside the scope element.

import { readableError } from "./error_text.js";

// The server's limit on custom_text and reject_reason (kandev.clarification.outcome
// MAX_TEXT_RUNES; tests/web/test_account_http.py keeps the two equal).
export const MAX_RUNES = 2000;
export const COUNTER_FROM = 1800;
export const SKIP_REASON = "User skipped";
const INPUT_CAPABLE = new Set(["RUNNING", "WAITING_FOR_INPUT"]);

export const countRunes = (text) => [...text].length;

const isPending = (row) => {
  const status = row.metadata?.status;
  return status === undefined || status === null || status === "" || status === "pending";
};
const byCreation = (a, b) =>
  a.created_at === b.created_at ? (a.id < b.id ? -1 : 1) : a.created_at < b.created_at ? -1 : 1;

// The rows of the bundle awaiting an answer now, in question order, or [] (reference §4.2).
export function activeBundle(rows, session) {
  if (!session || !INPUT_CAPABLE.has(session.state)) return [];
  const turn = session.current_turn_id;
  const candidates = rows.filter((r) => isPending(r) && (!turn || r.turn_id === turn));
  if (!candidates.length) return [];
  const latest = [...candidates].sort(byCreation).at(-1);
  const pendingId = latest.metadata.pending_id;
  const bundle = rows.filter((r) => r.metadata?.pending_id === pendingId);
  const total = Number(latest.metadata.question_total || bundle.length);
  if (bundle.length < total) return []; // arrival gate: never act on a half-streamed bundle
  return bundle.filter(isPending).sort(
    (a, b) => Number(a.metadata.question_index) - Number(b.metadata.question_index),
  );
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
}

export class ClarificationOverlay {
  constructor(root, { scope = document.body, fetchImpl = (...a) => fetch(...a) } = {}) {
    this.root = root;
    this.scope = scope;
    this.fetch = fetchImpl;
    this.pendingId = null;
    this.rows = [];
    this.answers = new Map(); // question_id → {selected: string[], text: string}
    this.index = 0;
    this.collapsed = false;
    this.submitting = false;
    this.error = "";
    this.onKey = this.onKey.bind(this);
    window.addEventListener("keydown", this.onKey);
  }

  get open() { return this.rows.length > 0; }

  // Re-evaluate from all known clarification rows of the session.
  update(allRows, session) {
    const bundle = activeBundle(allRows, session);
    const pendingId = bundle[0]?.metadata.pending_id ?? null;
    if (pendingId !== this.pendingId) {
      // A new bundle always opens expanded, with nothing answered (reference §4.3).
      this.pendingId = pendingId;
      this.answers = new Map();
      this.index = 0;
      this.collapsed = false;
      this.error = "";
    }
    const signature = bundle.map((r) => `${r.id}:${r.updated_at}`).join(",");
    if (signature === this.signature && pendingId === this.pendingId && this.rendered) return;
    this.signature = signature;
    this.rows = bundle;
    this.index = Math.min(this.index, Math.max(0, bundle.length - 1));
    this.render();
    this.rendered = true;
  }

  questionId(row) { return row.metadata.question_id || row.metadata.question?.id; }
  answerOf(row) { return this.answers.get(this.questionId(row)) || { selected: [], text: "" }; }
  isAnswered(row) {
    const a = this.answerOf(row);
    const runes = countRunes(a.text.trim());
    return a.selected.length > 0 || (runes > 0 && runes <= MAX_RUNES);
  }
  get answeredCount() { return this.rows.filter((r) => this.isAnswered(r)).length; }
  get allAnswered() { return this.open && this.answeredCount === this.rows.length; }

  // --- answering ---------------------------------------------------------------------

  toggleOption(optionId) {
    const row = this.rows[this.index];
    if (!row || this.submitting) return;
    const current = this.answerOf(row);
    const selected = current.selected.includes(optionId)
      ? current.selected.filter((id) => id !== optionId)
      : [...current.selected, optionId];
    // An option and a custom answer are exclusive: picking an option clears the draft.
    this.answers.set(this.questionId(row), { selected, text: "" });
    this.render();
  }

  setText(text) {
    const row = this.rows[this.index];
    if (!row) return;
    // Typing selects the custom answer: the options of this question are deselected.
    this.answers.set(this.questionId(row), { selected: [], text });
    this.renderStatus();
  }

  go(index) {
    if (index < 0 || index >= this.rows.length) return;
    this.index = index;
    this.render();
    this.root.querySelector(".clarify-card")?.focus({ preventScroll: true });
  }

  next() {
    if (this.index < this.rows.length - 1) this.go(this.index + 1);
    else if (this.allAnswered) this.submit();
  }

  collapse(value = !this.collapsed) {
    this.collapsed = value;
    this.render();
  }

  payload() {
    return this.rows.map((row) => {
      const a = this.answerOf(row);
      const text = a.text.trim();
      return text
        ? { question_id: this.questionId(row), selected_options: [], custom_text: text }
        : { question_id: this.questionId(row), selected_options: a.selected };
    });
  }

  async submit() {
    if (!this.allAnswered) return;
    await this.send({ answers: this.payload() });
  }

  async skipAll() {
    if (!this.open) return;
    await this.send({ rejected: true, reject_reason: SKIP_REASON });
  }

  async send(body) {
    if (this.submitting || !this.pendingId) return; // one request in flight
    this.submitting = true;
    this.error = "";
    this.render();
    const pendingId = this.pendingId;
    const snapshot = this.rows.map((r) => r.id); // the bundle as it was when submitted
    let res;
    try {
      res = await this.fetch(`/api/v1/clarification/${encodeURIComponent(pendingId)}/respond`, {
        method: "POST",
        credentials: "include", // seed W1
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
      });
    } catch {
      res = null;
    }
    this.submitting = false;
    if (!res || (!res.ok && res.status !== 409)) {
      let message = "Could not send the answer; try again.";
      try { message = readableError((await res.json()).error) || message; } catch { /* keep default */ }
      this.error = message;
      this.render();
      return;
    }
    let result = null;
    if (res.status !== 409) {
      try { result = await res.json(); } catch { result = null; }
    }
    // W2/W3: claimed:false means another answer won; show the WINNER's answer, not ours.
    const lost = result && result.claimed === false;
    const status = result?.status || (body.rejected ? "rejected" : "answered");
    const response = lost || (result && result.response) ? result.response : body;
    const detail = {
      pendingId, messageIds: snapshot, claimed: result ? result.claimed : undefined,
      status: lost ? result.status : status, response, conflict: res.status === 409,
    };
    this.rows = [];
    this.pendingId = null;
    this.signature = "";
    this.render();
    this.root.dispatchEvent(new CustomEvent("clarification:resolved", { detail, bubbles: true }));
  }

  // --- keyboard ----------------------------------------------------------------------

  onKey(event) {
    if (!this.open || event.defaultPrevented) return;
    if (!this.scope.contains(event.target)) return; // only while focus is in the panel
    const typing = event.target.closest?.("input, textarea, select, [contenteditable]");
    const modified = event.altKey || event.ctrlKey || event.metaKey || event.shiftKey;
    if (event.key === "Escape" && !modified) {
      if (!this.collapsed) { event.preventDefault(); this.collapse(true); }
      return;
    }
    if (this.collapsed || this.submitting) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      this.submit();
      return;
    }
    if (typing || modified) return;
    if (/^[1-9]$/.test(event.key)) {
      const options = this.rows[this.index]?.metadata.question?.options || [];
      const option = options[Number(event.key) - 1];
      if (option) { event.preventDefault(); this.toggleOption(option.option_id); }
    } else if (event.key === "ArrowLeft") {
      event.preventDefault(); this.go(this.index - 1);
    } else if (event.key === "ArrowRight") {
      event.preventDefault(); this.next();
    }
  }

  // --- rendering ---------------------------------------------------------------------

  renderStatus() {
    // Cheap refresh while typing: progress, stepper marks, Submit, custom-box state, counter.
    const root = this.root;
    const progress = root.querySelector("[data-progress]");
    if (progress) progress.textContent = `${this.answeredCount} of ${this.rows.length} answered`;
    root.querySelectorAll(".clarify-steps button").forEach((b, i) => {
      b.classList.toggle("answered", this.isAnswered(this.rows[i]));
    });
    const submit = root.querySelector("[data-submit]");
    if (submit) submit.disabled = !this.allAnswered || this.submitting;
    const row = this.rows[this.index];
    if (!row) return;
    const a = this.answerOf(row);
    const runes = countRunes(a.text);
    root.querySelector(".custom")?.classList.toggle("active", a.text.trim() !== "");
    root.querySelectorAll(".option").forEach((b) => {
      b.setAttribute("aria-pressed", String(a.selected.includes(b.dataset.optionId)));
    });
    const counter = root.querySelector("[data-rune-count]");
    if (counter) {
      counter.hidden = runes <= COUNTER_FROM;
      counter.classList.toggle("over", runes > MAX_RUNES);
      counter.textContent = runes > MAX_RUNES
        ? `${runes} / ${MAX_RUNES} · ${runes - MAX_RUNES} characters over the ${MAX_RUNES}-character limit`
        : runes >= MAX_RUNES ? `${runes} / ${MAX_RUNES} · limit reached` : `${runes} / ${MAX_RUNES}`;
    }
  }

  render() {
    const root = this.root;
    if (!this.open) {
      root.hidden = true;
      root.replaceChildren();
      return;
    }
    root.hidden = false;
    root.classList.toggle("collapsed", this.collapsed); // a bar only: the page need not make room
    root.dataset.pendingId = this.pendingId;
    // Re-rendering replaces nodes: keep focus where it was (keyboard shortcuts need it).
    const active = document.activeElement;
    const hadFocus = root.contains(active);
    const focusedText = hadFocus && active.matches("[data-custom]");
    const focusedOption = hadFocus ? active.dataset?.optionId : undefined;
    const total = this.rows.length;
    const multi = total > 1;
    const bar = el("div", { class: "clarify-bar" },
      el("h2", {}, el("span", { class: "q-icon", "aria-hidden": "true", text: "?" }), "Clarification needed"),
      el("span", { class: "progress", text: `${total} question${multi ? "s" : ""}` }),
    );
    if (this.collapsed) {
      bar.append(el("div", { class: "clarify-actions" },
        el("button", { type: "button", class: "btn btn-sm", "aria-expanded": "false",
          "data-testid": "clarification-collapse-toggle", onclick: () => this.collapse(false) },
        "Show questions")));
      root.replaceChildren(bar);
      return;
    }
    if (multi) {
      bar.append(el("ol", { class: "clarify-steps", "aria-label": "Questions" },
        this.rows.map((r, i) => el("li", {}, el("button", {
          type: "button", class: this.isAnswered(r) ? "answered" : "",
          "aria-current": i === this.index ? "step" : false, "aria-label": `Question ${i + 1}`,
          onclick: () => this.go(i),
        }, String(i + 1))))));
    }
    bar.append(el("span", { class: "progress", "data-progress": true,
      text: `${this.answeredCount} of ${total} answered` }));
    bar.append(el("div", { class: "clarify-actions" },
      el("button", { type: "button", class: "btn btn-primary btn-sm", "data-submit": true,
        disabled: !this.allAnswered || this.submitting, title: "Submit (Ctrl/⌘+Enter)",
        onclick: () => this.submit() }, this.submitting ? "Submitting…" : "Submit"),
      el("button", { type: "button", class: "btn btn-sm", title: "Skip all questions",
        disabled: this.submitting, onclick: () => this.skipAll() },
        el("span", { "aria-hidden": "true", text: "✕ " }), "Skip all"),
      el("button", { type: "button", class: "btn btn-ghost btn-sm", "aria-expanded": "true",
        "aria-label": "Hide questions", "data-testid": "clarification-collapse-toggle",
        onclick: () => this.collapse(true) }, el("span", { "aria-hidden": "true", text: "▾" })),
    ));

    const body = el("div", { class: "clarify-body" });
    const context = (this.rows[0].metadata.context || "").trim();
    if (context) body.append(el("div", { class: "clarify-context", "data-context": true, text: context }));
    if (this.rows.some((r) => r.metadata.agent_disconnected)) {
      body.append(el("p", { class: "muted", text: "The agent has moved on; your answer will be sent as a new message." }));
    }
    body.append(this.renderCard(this.rows[this.index], this.index, total));
    if (this.error) body.append(el("p", { class: "clarify-error", role: "alert", text: this.error }));
    root.replaceChildren(bar, body);
    this.renderStatus();
    if (focusedText) {
      const box = root.querySelector("[data-custom]");
      box?.focus();
      box?.setSelectionRange(box.value.length, box.value.length);
    } else if (focusedOption) {
      root.querySelector(`.option[data-option-id="${CSS.escape(focusedOption)}"]`)?.focus()
        ?? root.querySelector(".clarify-card")?.focus({ preventScroll: true });
    } else if (hadFocus) {
      root.querySelector(".clarify-card")?.focus({ preventScroll: true });
    }
  }

  renderCard(row, index, total) {
    const q = row.metadata.question || { prompt: row.content, options: [] };
    const a = this.answerOf(row);
    const card = el("div", { class: "clarify-card", tabindex: "-1", "data-question-id": this.questionId(row) });
    if (total > 1) card.append(el("div", { class: "qnum", text: `Question ${index + 1} of ${total}` }));
    if (q.title) card.append(el("div", { class: "qtitle", text: q.title }));
    const prompt = el("div", { class: "qprompt md" });
    const rendered = this.root.ownerDocument.getElementById(`msg-${row.id}`)?.querySelector(".qa-q");
    if (rendered) prompt.innerHTML = rendered.innerHTML; // the server's sanitized Markdown
    else prompt.textContent = q.prompt || row.content;
    card.append(prompt);
    card.append(el("div", { class: "options", role: "group", "aria-label": "Options" },
      (q.options || []).map((opt, i) => el("button", {
        type: "button", class: "option", "data-option-id": opt.option_id,
        "aria-pressed": String(a.selected.includes(opt.option_id)),
        onclick: () => this.toggleOption(opt.option_id),
      },
      el("kbd", { "aria-hidden": "true", text: String(i + 1) }),
      el("span", { class: "opt-label", text: opt.label }),
      opt.description ? el("span", { class: "opt-desc", text: opt.description }) : null,
      el("span", { class: "opt-check", "aria-hidden": "true", text: "✓" })))));
    const id = `clarify-answer-${row.id}`;
    const box = el("textarea", {
      // No maxlength: it counts UTF-16 units (an emoji is two), the server counts code points.
      // guardRunes stops typing at exactly MAX_RUNES, as the counter says.
      id, rows: "2", "data-custom": true,
      placeholder: a.text ? "Press Enter to update your answer" : "Type your own answer…",
    });
    box.value = a.text;
    box.addEventListener("beforeinput", (event) => this.guardRunes(event, box));
    box.addEventListener("input", () => this.setText(box.value));
    box.addEventListener("keydown", (event) => this.onTextKey(event, box));
    const custom = el("div", { class: "custom" },
      el("label", { for: id, text: "Your answer" }), box,
      el("div", { class: "rune-count", "data-rune-count": true, "aria-live": "polite", hidden: true }));
    card.append(custom);
    if (total > 1) {
      card.append(el("div", { class: "clarify-nav" },
        el("button", { type: "button", class: "btn btn-sm", disabled: index === 0,
          onclick: () => this.go(index - 1) }, "← Back"),
        index < total - 1
          ? el("button", { type: "button", class: "btn btn-sm", onclick: () => this.go(index + 1) }, "Next →")
          : null));
    }
    return card;
  }

  guardRunes(event, box) {
    // Stop a human at the server's boundary (N8b): 2000 code points, an emoji counts once.
    if (!event.inputType?.startsWith("insert")) return;
    let incoming = event.data ?? event.dataTransfer?.getData("text/plain") ?? "";
    if (event.inputType === "insertLineBreak" || event.inputType === "insertParagraph") incoming = "\n";
    const selected = box.value.slice(box.selectionStart, box.selectionEnd);
    const after = countRunes(box.value) - countRunes(selected) + countRunes(incoming);
    if (after > MAX_RUNES) {
      event.preventDefault();
      const counter = this.root.querySelector("[data-rune-count]");
      if (counter) {
        counter.hidden = false;
        counter.classList.add("over");
        counter.textContent = `${countRunes(box.value)} / ${MAX_RUNES} · the answer is limited to ${MAX_RUNES} characters`;
      }
    }
  }

  onTextKey(event, box) {
    if (event.key !== "Enter" || event.isComposing || event.repeat) return;
    if (event.shiftKey || event.altKey) return; // a newline
    event.preventDefault();
    if (event.ctrlKey || event.metaKey) { this.submit(); return; }
    if (countRunes(box.value) > MAX_RUNES || !box.value.trim()) return;
    this.setText(box.value);
    if (this.rows.length === 1) this.submit();
    else this.next();
  }

  destroy() { window.removeEventListener("keydown", this.onKey); }
}
