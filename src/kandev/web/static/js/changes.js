// The task page's Changes panel: the server renders it (GET /tasks/{id}/changes-fragment);
// this module fetches it, refreshes it on `task.changes_updated`, toggles the per-file
// "reviewed" marks (POST /tasks/{id}/reviewed-form) and collects line comments client-side
// until "Send review" POSTs them to /api/v1/tasks/{id}/review (one prompt to the agent).
// "All changes" / "Since my last review" picks the fragment's `since` (kept across refreshes).
import { api, errorText, toast } from "./app.js";
import { fetchFragment } from "./live.js";

export class ChangesPanel {
  constructor(root, taskId) {
    this.root = root;
    this.taskId = taskId;
    this.comments = []; // {path, line, body}
    this.loading = null;
    this.again = false;
    this.since = root.dataset.since || ""; // "" | "last_review"
    // What the last commit or merge from the panel did (its notice or error): kept across
    // the refresh its own `task.changes_updated` triggers, until the next action.
    this.flash = null;
    root.parentElement.addEventListener("click", (event) => this.onClick(event));
    root.parentElement.addEventListener("submit", (event) => this.onSubmit(event));
  }

  async refresh() {
    // Coalesced: one fetch at a time, and one more if asked meanwhile.
    if (this.loading) { this.again = true; return this.loading; }
    this.loading = (async () => {
      do {
        this.again = false;
        const query = this.since ? `?since=${encodeURIComponent(this.since)}` : "";
        const { element } = await fetchFragment(`/tasks/${this.taskId}/changes-fragment${query}`);
        if (element) this.swap(element, { keepFlash: true });
        else if (!this.root.dataset.loaded) this.root.querySelector("p").textContent = "The changes could not be read.";
      } while (this.again);
    })();
    try { await this.loading; } finally { this.loading = null; }
  }

  swap(element, { keepFlash = false } = {}) {
    const open = this.root.querySelector(".diff-comment textarea");
    if (open && open.value.trim()) return; // keep a comment being written; the next event refreshes
    element.dataset.loaded = "1";
    const said = element.querySelector("#changes-notice, #changes-error");
    if (said) this.flash = said.cloneNode(true);
    else if (keepFlash && this.flash) element.querySelector(".changes-actions")?.before(this.flash.cloneNode(true));
    this.root.replaceWith(element);
    this.root = element;
    this.showComments();
  }

  fileOf(node) { return node.closest(".diff-file")?.dataset.path; }

  rowFor(path, line) {
    const file = [...this.root.querySelectorAll(".diff-file")].find((f) => f.dataset.path === path);
    return file?.querySelector(`tr[data-line="${line}"]`) || null;
  }

  showComments() {
    for (const row of this.root.querySelectorAll("tr.diff-comment")) row.remove();
    for (const c of this.comments) {
      const anchor = this.rowFor(c.path, c.line);
      if (!anchor) continue;
      const tr = document.createElement("tr");
      tr.className = "diff-comment";
      tr.dataset.commentFor = `${c.path}:${c.line}`;
      const td = document.createElement("td");
      td.colSpan = 3;
      const text = document.createElement("div");
      text.className = "comment-text";
      text.textContent = c.body;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "btn btn-sm";
      remove.dataset.action = "remove-comment";
      remove.textContent = "Remove";
      const row = document.createElement("div");
      row.className = "row";
      row.append(remove);
      td.append(text, row);
      tr.append(td);
      anchor.after(tr);
    }
    const count = this.root.querySelector("#review-count");
    if (count) {
      count.dataset.count = String(this.comments.length);
      count.textContent = this.comments.length
        ? `${this.comments.length} comment${this.comments.length === 1 ? "" : "s"}`
        : "No comments";
    }
    const send = this.root.querySelector("[data-action='send-review']");
    if (send) send.disabled = !this.comments.length;
  }

  openEditor(button) {
    const path = this.fileOf(button);
    const line = Number(button.dataset.line);
    this.root.querySelector("tr.diff-comment-new")?.remove();
    const tr = document.createElement("tr");
    tr.className = "diff-comment diff-comment-new";
    const td = document.createElement("td");
    td.colSpan = 3;
    const form = document.createElement("form");
    form.dataset.commentForm = "";
    form.dataset.path = path;
    form.dataset.line = String(line);
    const label = document.createElement("label");
    label.className = "sr-only";
    label.textContent = `Comment on ${path} line ${line}`;
    const box = document.createElement("textarea");
    box.name = "body";
    box.rows = 2;
    box.required = true;
    box.placeholder = `Comment on ${path}:${line}…`;
    box.setAttribute("aria-label", `Comment on ${path} line ${line}`);
    label.append(box);
    const row = document.createElement("div");
    row.className = "row";
    const add = document.createElement("button");
    add.type = "submit";
    add.className = "btn btn-primary btn-sm";
    add.textContent = "Add comment";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "btn btn-sm";
    cancel.dataset.action = "cancel-comment";
    cancel.textContent = "Cancel";
    row.append(add, cancel);
    form.append(box, row);
    td.append(form);
    tr.append(td);
    button.closest("tr").after(tr);
    box.focus();
  }

  async onClick(event) {
    const target = event.target.closest("[data-action]");
    if (!target || !this.root.contains(target)) return;
    const action = target.dataset.action;
    if (action === "comment") this.openEditor(target);
    else if (action === "cancel-comment") target.closest("tr").remove();
    else if (action === "remove-comment") {
      const key = target.closest("tr").dataset.commentFor;
      const index = this.comments.findIndex((c) => `${c.path}:${c.line}` === key);
      if (index >= 0) this.comments.splice(index, 1);
      this.showComments();
    } else if (action === "send-review") this.sendReview(target);
    else if (action === "changes-view" && (target.dataset.since || "") !== this.since) {
      this.since = target.dataset.since || "";
      this.flash = null;
      this.refresh();
    }
  }

  async onSubmit(event) {
    const form = event.target;
    if (!this.root.contains(form)) return;
    if (form.matches("[data-comment-form]")) {
      event.preventDefault();
      const body = form.body.value.trim();
      if (!body) return;
      this.comments.push({ path: form.dataset.path, line: Number(form.dataset.line), body });
      form.closest("tr").remove();
      this.showComments();
    } else if (form.matches(".reviewed-form, .commit-form, .merge-form")) {
      event.preventDefault();
      this.flash = null;
      const button = form.querySelector("button[type='submit']");
      if (button) button.disabled = true;
      const res = await fetch(form.action, {
        method: "POST", credentials: "include", headers: { "HX-Request": "true" },
        body: new URLSearchParams(new FormData(form)),
      });
      const template = document.createElement("template");
      template.innerHTML = (await res.text()).trim();
      const element = template.content.firstElementChild;
      // A commit or a merge that failed answers with the panel and its error sentence.
      if (element && element.id === "changes-panel") { this.swap(element); return; }
      if (button) button.disabled = false;
      if (!res.ok) toast(`Not done: ${element ? element.textContent : res.status}`, "error");
    }
  }

  async sendReview(button) {
    if (!this.comments.length) return;
    button.disabled = true;
    const result = await api("POST", `/api/v1/tasks/${this.taskId}/review`, { comments: this.comments });
    if (!result.ok) { button.disabled = false; toast(`Review not sent: ${errorText(result)}`, "error"); return; }
    this.comments = [];
    this.showComments();
    toast(result.body?.queued ? "Review queued for the agent" : "Review sent to the agent");
  }
}
