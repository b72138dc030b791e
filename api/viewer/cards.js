// A chunk as a card (Browse and Search), and correcting its messages' text: PATCH
// /agents/{bot}/messages/{id} with the session's key, the outcome in words, the chunk read
// again. As everywhere in the viewer, data reaches the page as text only (see dom.js).
import { ApiError, agentPath, api, el, isoTime, rendered } from "/ui/dom.js";

const OUTCOMES = {
  edited: "saved — the chunk is rewritten in a few seconds",
  unchanged: "unchanged: the message already had this text",
  emptied: "too short to keep: the message left its chunk",
  stale: "stale: this chunk was written before edits were kept and cannot be rebuilt; it keeps its old text",
};
const NOT_EDITABLE = {
  st: "Written by SillyTavern (st-qdrant-memory), which keeps no message of a chunk apart: its messages cannot be edited here.",
  old: "Written before memory-pool kept each message of a chunk: its messages cannot be edited.",
};
const GONE = " This chunk is no longer stored under this point id (emptied, or moved to its first remaining message's id): show the list again.";
const NOT_YET = " (not yet: a chunk still open is written again once its conversation is idle, "
  + "idle_flush_seconds, 60 s by default; show the list again then)";
// A browser resolves "." and ".." path segments away, even percent-encoded: no URL reaches them.
const UNREACHABLE = new Set([".", ".."]);
const POLL_MS = 500;
const POLL_LIMIT_MS = 15000;

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

// `agent` is the agent the chunk was read for: an edit goes to it even if the picker changed.
// `shown` carries what a reloaded card keeps: the last outcome, and the list left open.
export function memoryCard(m, actions, agent, shown = {}) {
  const where = [["channel", m.channel_id], ["guild", m.guild_id], ["conversation", m.conversation_id]]
    .filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(" · ");
  const card = el("article", { class: "card memory", "data-id": m.id },
    el("header", {},
      el("strong", { class: "date", text: m.date || "no date" }), " ",
      el("span", { class: "source", text: m.writer }), " ",
      el("span", { class: "speakers", text: m.speakers.join(", ") })),
    el("pre", { class: "text", text: m.text }),
    el("p", { class: "meta" }, where ? el("span", { text: where }) : null,
      el("span", { class: "ids", text: `messages: ${m.message_ids.join(", ") || "none"}` }),
      m.user_ids.length ? el("span", { text: `people: ${m.user_ids.join(", ")}` }) : null,
      el("span", { class: "point-id", text: `point ${m.id}` })));
  const ctx = { m, actions, agent, card };
  card.append(shown.gone ? note(shown) : editPart(ctx, shown));
  if (actions) card.append(actions);
  return card;
}

function note(shown) {
  return el("p", { class: `edit-status ${shown.kind || ""}`, role: "status", text: shown.note || "" });
}

function editable(m) {
  return Array.isArray(m.messages) && m.messages.length > 0 && m.source !== null && m.source !== undefined;
}

function editPart(ctx, shown) {
  if (!editable(ctx.m)) {
    const why = ctx.m.source === null || ctx.m.source === undefined ? NOT_EDITABLE.st : NOT_EDITABLE.old;
    const short = why === NOT_EDITABLE.st ? "written by SillyTavern" : "written before edits were kept";
    return el("p", { class: "hint no-edit", title: why, text: `Messages not editable: ${short}.` });
  }
  const status = note(shown);
  const rows = ctx.m.messages.map((message) => messageRow(message, ctx, status));
  return el("details", { class: "edit", open: shown.open },
    el("summary", { text: `Correct a message (${ctx.m.messages.length})` }),
    el("ol", { class: "messages" }, rows), status);
}

function messageRow(message, ctx, status) {
  const said = el("span", { class: "said", text: message.text });
  const box = el("textarea", { name: "text", rows: 3, required: true }); // the server says its limit (413)
  const form = el("form", { class: "edit-form", hidden: true },
    box, el("button", { type: "submit", class: "small", text: "Save" }),
    el("button", { type: "button", class: "small quiet cancel", text: "Cancel",
      onclick: () => { form.hidden = true; said.hidden = false; edit.hidden = false; } }));
  const edit = el("button", { type: "button", class: "small edit", text: "Edit",
    onclick: () => { box.value = message.text; form.hidden = false; said.hidden = true; edit.hidden = true; box.focus(); } });
  if (UNREACHABLE.has(message.id)) {
    edit.disabled = true;
    edit.title = "A browser cannot address this message id; edit it with the API (client.edit).";
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    saveEdit(ctx, message, box.value, status).catch((error) => {
      show(status, error instanceof ApiError ? error.detail : String(error), "error");
      for (const button of ctx.card.querySelectorAll("details.edit button")) button.disabled = false;
    });
  });
  return el("li", { class: "message", "data-message-id": message.id },
    el("span", { class: "who", text: `${message.speaker} · ${isoTime(message.ts)}` }), said, edit, form);
}

function show(status, text, kind = "") {
  status.textContent = text;
  status.className = `edit-status ${kind}`;
  rendered(status.closest(".cards") || status);
}

async function saveEdit(ctx, message, text, status) {
  const buttons = [...ctx.card.querySelectorAll("details.edit button")];
  for (const button of buttons) button.disabled = true;
  const path = agentPath(ctx.agent, `/messages/${encodeURIComponent(message.id)}`);
  let shown;
  let changed = null;
  try {
    const done = await api("PATCH", path, { body: { source: ctx.m.source, text } });
    shown = { note: OUTCOMES[done.outcome] || done.outcome, kind: "" };
    // A worker rewrites the chunk: it is read again until its text changed, or it left.
    if (done.outcome === "edited" || done.outcome === "emptied") changed = (fresh) => fresh === null || fresh.text !== ctx.m.text;
  } catch (error) {
    shown = { note: error instanceof ApiError ? error.detail : String(error), kind: "error" };
  }
  show(status, shown.note, shown.kind);
  await reload(ctx, { ...shown, open: true }, changed);
}

async function reload(ctx, shown, changed) {
  const path = agentPath(ctx.agent, `/memories/${encodeURIComponent(ctx.m.id)}`);
  const read = () => api("GET", path).catch((error) => {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  });
  let fresh = await read();
  const deadline = Date.now() + POLL_LIMIT_MS;
  while (changed && !changed(fresh) && Date.now() < deadline && ctx.card.isConnected) {
    await sleep(POLL_MS);
    fresh = await read();
  }
  if (!ctx.card.isConnected) return;  // the list was shown again meanwhile
  const late = changed && !changed(fresh) ? NOT_YET : "";
  const next = fresh === null
    ? memoryCard(ctx.m, ctx.actions, ctx.agent, { ...shown, note: shown.note + GONE, gone: true })
    : memoryCard(fresh, ctx.actions, ctx.agent, { ...shown, note: shown.note + late });
  ctx.card.replaceWith(next);
  rendered(next.closest(".cards") || next);
}

// chunkMessages as a Memory's `messages` (the API's shape), for cards built from a raw payload
// (Search); null unless every record is whole, as the server reads them.
export function messagesOf(records) {
  if (!Array.isArray(records) || !records.length) return null;
  const present = (value) => value !== undefined && value !== null;
  const whole = (r) => present(r) && typeof r === "object" && ["id", "speaker", "text", "ts"].every((k) => present(r[k]))
    && Number.isInteger(Number(r.ts));
  if (!records.every(whole)) return null;
  return records.map((r) => ({ id: String(r.id), speaker: String(r.speaker), ts: Number(r.ts), text: String(r.text),
    user_id: r.userId === undefined || r.userId === null ? null : String(r.userId), is_self: Boolean(r.self) }));
}
