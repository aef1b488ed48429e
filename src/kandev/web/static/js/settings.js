// Settings pages: copy buttons and confirmations. Everything works without it except the
// copy button (the text stays selectable).
import { toast } from "./app.js";

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // http on a LAN address is not a secure context: fall back to a selection copy.
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  const done = document.execCommand("copy");
  area.remove();
  if (!done) throw new Error("copy refused");
}

document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source) return;
  const label = button.textContent;
  try {
    await copyText(source.textContent);
    button.textContent = "Copied";
    button.dataset.copied = "1";
    setTimeout(() => { button.textContent = label; delete button.dataset.copied; }, 2000);
  } catch {
    toast("Copy failed: select the text and copy it yourself.", "error");
  }
});

document.addEventListener("submit", (event) => {
  const message = event.target.dataset?.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// The page that shows a new token answers a POST: turn its history entry into a plain GET,
// so a reload shows the list instead of minting another token (the raw one stays unseen).
if (document.getElementById("new-token")) history.replaceState(null, "", location.href);
