// An API error message as a page shows it, the rule of web/error_text.py:
// "title: must not be empty" → "Title must not be empty."
const FIELD_PREFIX = /^([A-Za-z_][\w.[\]]*): ([\s\S]+)$/;
const VERBS = new Set(["must", "is", "are", "cannot", "can", "should", "has", "needs", "may"]);

export function readableError(message) {
  let text = String(message ?? "").trim();
  if (!text) return "";
  const prefixed = FIELD_PREFIX.exec(text);
  if (prefixed) {
    const joiner = VERBS.has(prefixed[2].split(" ", 1)[0]) ? " " : ": ";
    text = `${prefixed[1].replace(/_/g, " ")}${joiner}${prefixed[2]}`;
  }
  text = text[0].toUpperCase() + text.slice(1);
  return /[.!?]$/.test(text) ? text : `${text}.`;
}
