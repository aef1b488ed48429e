// One EventSource on /api/v1/events (scoped by the server), fanned out to handlers.
// `lastEventId` is the bus id the page was rendered at (data-last-event-id): the first
// connection replays what happened between the render and the stream opening, passed as
// ?last_event_id= since EventSource cannot set headers. The browser reconnects by itself
// and sends Last-Event-ID (which the server prefers), so nothing is missed; a
// `stream.reset` (events were lost) calls onReset so the page can refetch.

export function connectEvents({ params = {}, lastEventId, onEvent, onReset, statusEl } = {}) {
  const all = { ...params, last_event_id: lastEventId };
  const query = new URLSearchParams(Object.entries(all).filter(([, v]) => v)).toString();
  const source = new EventSource(`/api/v1/events${query ? `?${query}` : ""}`, { withCredentials: true });
  const setStatus = (state) => { if (statusEl) statusEl.dataset.state = state; };
  source.onopen = () => { setStatus("live"); document.body.dataset.live = "1"; };
  source.onerror = () => setStatus("offline");
  source.onmessage = (message) => {
    let event;
    try { event = JSON.parse(message.data); } catch { return; }
    if (event.type === "stream.reset") { onReset?.(event); return; }
    try { onEvent?.(event); } catch (err) { console.error("event handler failed", err); }
  };
  return source;
}

// Fetch an HTML fragment and return its first element (or null).
export async function fetchFragment(url) {
  const res = await fetch(url, { credentials: "include", headers: { "HX-Request": "true" } });
  if (!res.ok) return { status: res.status, element: null };
  const template = document.createElement("template");
  template.innerHTML = (await res.text()).trim();
  return { status: res.status, element: template.content.firstElementChild, fragment: template.content };
}
