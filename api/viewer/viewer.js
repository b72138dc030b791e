// The memory viewer: five views over memory-pool's JSON API. No data is ever written into the
// page as markup (see dom.js); every action is checked by the server with the session's key.
import { $, ApiError, agentPath, api, clear, dayMs, el, isoDate, isoTime, key, rendered, status } from "/ui/dom.js";
import { memoryCard, messagesOf } from "/ui/cards.js";
import { dayChart } from "/ui/chart.js";

const ST = "sillytavern (extension)";
// `/ui?agent=NAME#browse` opens on that agent (a link to share, or to bookmark).
const state = { agents: [], bot: new URLSearchParams(location.search).get("agent"), cursors: [null], page: 0, prune: null };

const bot = () => state.bot;
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const fail = (error) => status(error instanceof ApiError ? error.detail : String(error), "error");

// --- agents and keys ------------------------------------------------------------------------

async function loadAgents() {
  const listed = await api("GET", "/agents");
  state.agents = listed.agents;
  $("#key-button").hidden = !listed.keys_configured;
  const picker = clear($("#agent"));
  for (const agent of listed.agents) picker.append(el("option", { value: agent.name, text: agent.name }));
  if (!listed.agents.some((a) => a.name === state.bot)) state.bot = listed.agents[0]?.name || null;
  picker.value = state.bot || "";
  if (!listed.agents.length) {
    status(listed.keys_configured ? "No agent is visible without a key: enter an API key." : "No agents yet.");
    if (listed.keys_configured && !key.get()) showKeyForm(true);
  }
}

function showKeyForm(open) {
  $("#key-form").hidden = !open;
  if (open) $("#key-input").focus();
}

async function renderAgents() {
  const body = clear($("#agents-table tbody"));
  for (const agent of state.agents) {
    const row = el("tr", {}, el("td", { text: agent.name }), el("td", { text: agent.collection }));
    body.append(row);
    try {
      const s = await api("GET", agentPath(agent.name, "/stats"));
      const sources = Object.entries(s.points_by_source).map(([n, c]) => `${n}: ${c}`);
      if (s.points_without_source) sources.push(`${ST}: ${s.points_without_source}`);
      row.append(
        el("td", { text: s.points }), el("td", { text: sources.join(", ") || "none" }),
        el("td", { text: s.buffered_messages }), el("td", { text: isoTime(s.last_write) }),
        el("td", { class: agent.blocked ? "warn" : "", text: agent.blocked || "no" }),
      );
    } catch (error) {
      row.append(el("td", { colspan: 5, class: "error", text: error.detail || String(error) }));
    }
  }
  rendered(body);
}

// --- browse ---------------------------------------------------------------------------------

function filtersOf(form) {
  const data = new FormData(form);
  const out = {};
  for (const [name, value] of data.entries()) if (String(value).trim()) out[name] = String(value).trim();
  if ("since" in out) out.since = dayMs(out.since, false);
  if ("until" in out) out.until = dayMs(out.until, true);
  return out;
}

async function renderBrowse() {
  if (!bot()) return;
  const agent = bot();
  const list = clear($("#browse-list"));
  const query = { ...filtersOf($("#browse-form")), cursor: state.cursors[state.page] };
  const page = await api("GET", agentPath(agent, "/memories"), { query });
  for (const m of page.memories) {
    const remove = el("button", { type: "button", class: "danger small", text: "Delete this chunk",
      onclick: () => startPrune({ scope: "point_id", value: m.id }) });
    list.append(memoryCard(m, el("footer", {}, remove), agent));
  }
  if (!page.memories.length) list.append(el("p", { text: "No chunks match." }));
  state.cursors[state.page + 1] = page.next_cursor;
  $("#browse-next").disabled = !page.next_cursor;
  $("#browse-prev").disabled = state.page === 0;
  $("#browse-where").textContent = `page ${state.page + 1}`;
  rendered(list);
}

// --- search ---------------------------------------------------------------------------------

async function runSearch(form) {
  const f = filtersOf(form);
  const body = { bot: bot(), query_text: f.query_text || "", limit: Number(f.limit || 5),
    score_threshold: Number(f.score_threshold ?? 0.3),
    exclude_message_ids: (f.exclude || "").split(/[\s,]+/).filter(Boolean) };
  for (const name of ["source", "channel_id", "guild_id", "since", "until"]) if (f[name] != null) body[name] = f[name];
  const found = await api("POST", "/retrieve", { body });
  const hits = clear($("#search-hits"));
  for (const hit of found.hits) {
    const score = el("span", { class: "score", text: `score ${(hit.score * 100).toFixed(1)}% (${hit.score.toFixed(4)})` });
    const m = { id: hit.id, ...viewOf(hit.payload) };
    hits.append(memoryCard(m, el("footer", {}, score), body.bot));
  }
  if (!found.hits.length) hits.append(el("p", { text: "Nothing qualifies: the bot is told nothing." }));
  $("#search-block").textContent = found.formatted;
  rendered(hits);
}

function viewOf(p) {
  const ids = Array.isArray(p.messageIdList) ? p.messageIdList : String(p.messageIds || "").split(",").filter(Boolean);
  return { source: p.source ?? null, writer: p.source ?? ST, messages: messagesOf(p.chunkMessages),
    date: typeof p.timestamp === "number" ? isoDate(p.timestamp) : "",
    speakers: String(p.speakers || "").split(",").map((s) => s.trim()).filter(Boolean), text: String(p.text ?? ""),
    message_ids: ids.map(String), user_ids: Array.isArray(p.userIdList) ? p.userIdList.map(String) : [],
    channel_id: p.channelId, guild_id: p.guildId, conversation_id: p.conversationId };
}

// --- prune ----------------------------------------------------------------------------------

// The agent is fixed when the request is made: the delete a person confirms is the one that
// was counted, even if the agent picker changes in between.
function pruneRequest({ scope, value, source }, agent) {
  if (scope === "point_id") {
    const path = agentPath(agent, `/memories/${encodeURIComponent(value)}`);
    return { agent, preview: () => api("DELETE", path, { query: { dry_run: "true" } }), run: () => api("DELETE", path) };
  }
  const body = { [scope]: value };
  if (scope === "conversation_id" || scope === "channel_id") body.source = source;
  return { agent, preview: () => api("POST", agentPath(agent, "/delete/preview"), { body }),
    run: () => api("POST", agentPath(agent, "/delete"), { body }) };
}

function closePrune() {
  state.prune = null;
  $("#prune-confirm").hidden = true;
}

async function startPrune(wanted) {
  const form = $("#prune-form");
  form.scope.value = wanted.scope;
  form.value.value = wanted.value;
  form.source.value = wanted.source || "";
  location.hash = "#prune";
  await previewPrune(wanted);
}

async function previewPrune(wanted) {
  $("#prune-result").textContent = "";
  closePrune();
  const request = pruneRequest(wanted, bot());
  const counted = await request.preview();
  if (request.agent !== bot()) return;  // the agent changed while counting
  state.prune = request;
  $("#prune-count").textContent =
    `This removes ${plural(counted.points, "point")} (${plural(counted.message_ids, "message")}) ` +
    `from ${request.agent}'s memory, and any of those messages still buffered.`;
  $("#prune-st-note").hidden = !counted.points_without_source;
  $("#prune-go").textContent = `Delete ${plural(counted.points, "point")}`;
  $("#prune-confirm").hidden = false;
  rendered($("#prune-confirm"));
}

async function confirmPrune() {
  const request = state.prune;
  closePrune();
  if (!request || request.agent !== bot()) return;
  const done = await request.run();
  $("#prune-result").textContent =
    `Deleted ${done.deleted_points} points and ${done.deleted_buffered} buffered messages.`;
  rendered($("#prune-result"));
  state.cursors = [null];
  state.page = 0;
}

// --- pipeline -------------------------------------------------------------------------------

async function renderPipeline() {
  const backlog = clear($("#backlog"));
  const add = (name, value) => backlog.append(el("dt", { text: name }), el("dd", { text: value }));
  try {
    const health = await api("GET", "/health");
    if (health.redis) {
      add("Due conversations", health.redis.due_conversations);
      add("Buffered messages", health.redis.buffered_messages);
      add("Queued flush tasks", health.redis.queued_tasks);
      add("Dead letters", health.redis.dead_letters);
    } else add("Backlog", "needs a key valid for every agent");
  } catch (error) { add("Backlog", error.detail || String(error)); }
  if (bot()) {
    const days = await api("GET", agentPath(bot(), "/timeline"), { query: { days: 30 } });
    clear($("#chart")).append(dayChart(days.days, ST));
  }
  await renderQuarantine();
  await renderDeadLetters();
  rendered($("#view-pipeline"));
}

// QUARANTINE: GET /quarantine and POST /quarantine/release come with the quarantine work
// (issue #9, branch `quarantine`; entries: agent, conversation, source, reason, since, messages,
// failures). Without it this memory-pool answers 404 and the page says so.
async function renderQuarantine() {
  const box = clear($("#quarantine"));
  let found;
  try { found = await api("GET", "/quarantine", { query: { limit: 100 } }); } catch (error) {
    box.append(el("p", { class: "hint", text: error.status === 404
      ? "This memory-pool has no quarantine endpoint yet." : error.detail || String(error) }));
    return;
  }
  if (!found.entries.length) box.append(el("p", { text: "None." }));
  for (const entry of found.entries) {
    const release = el("button", { type: "button", class: "small", text: "Release (try again)",
      onclick: () => api("POST", "/quarantine/release", { body: { bot: entry.agent, conversation: entry.conversation } })
        .then((r) => status(`Released ${r.released}.`)).then(renderQuarantine).catch(fail) });
    box.append(el("article", { class: "card" },
      el("header", {}, el("strong", { text: entry.agent }), " ", el("span", { text: entry.conversation })),
      el("p", { class: "warn", text: entry.reason }),
      el("p", { class: "meta", text: `${entry.messages} messages waiting · ${entry.failures} failures · since ${isoTime(entry.since)}` }),
      el("footer", {}, release)));
  }
}

async function renderDeadLetters() {
  const box = clear($("#dead-letters"));
  let listed;
  try { listed = await api("GET", "/dead-letters", { query: { limit: 100 } }); } catch (error) {
    box.append(el("p", { class: "hint", text: error.detail || String(error) }));
    return;
  }
  if (!listed.entries.length) box.append(el("p", { text: "None." }));
  for (const letter of listed.entries) {
    const replay = el("button", { type: "button", class: "small", text: `Replay ${letter.agent}'s dead letters`,
      onclick: () => api("POST", "/dead-letters/replay", { body: { bot: letter.agent } })
        .then((r) => status(`Queued ${r.queued} for replay.`)).then(renderDeadLetters).catch(fail) });
    box.append(el("article", { class: "card" },
      el("header", {}, el("strong", { text: letter.agent }), " ", el("span", { text: isoTime(letter.at) })),
      el("p", { class: "warn", text: letter.reason }), el("pre", { class: "text", text: letter.text }),
      el("footer", {}, replay)));
  }
}

// --- shell ----------------------------------------------------------------------------------

const VIEWS = { agents: renderAgents, browse: renderBrowse, search: async () => {}, prune: async () => {}, pipeline: renderPipeline };

async function show() {
  const wanted = location.hash.slice(1);  // an own key only: "#__proto__" is `in` any object
  const name = Object.hasOwn(VIEWS, wanted) ? wanted : "agents";
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${name}`;
  for (const link of document.querySelectorAll("#tabs a")) link.classList.toggle("active", link.dataset.view === name);
  status("");
  try { await VIEWS[name](); } catch (error) { fail(error); }
}

function on(selector, event, handler) {
  $(selector).addEventListener(event, (e) => {
    if (event === "submit") e.preventDefault();
    Promise.resolve(handler(e)).catch(fail);
  });
}

async function start() {
  on("#key-form", "submit", async () => {
    key.set($("#key-input").value.trim());
    $("#key-input").value = "";
    showKeyForm(false);
    await loadAgents();
    await show();
  });
  on("#key-forget", "click", async () => { key.forget(); showKeyForm(false); await loadAgents(); await show(); });
  on("#key-button", "click", () => showKeyForm($("#key-form").hidden));
  document.addEventListener("needs-key", () => showKeyForm(true));
  on("#agent", "change", () => {
    state.bot = $("#agent").value; state.cursors = [null]; state.page = 0;
    closePrune();  // a count made for the previous agent confirms nothing for this one
    return show();
  });
  on("#browse-form", "submit", () => { state.cursors = [null]; state.page = 0; return renderBrowse(); });
  on("#browse-next", "click", () => { state.page += 1; return renderBrowse(); });
  on("#browse-prev", "click", () => { state.page = Math.max(0, state.page - 1); return renderBrowse(); });
  on("#search-form", "submit", (e) => runSearch(e.target));
  on("#prune-form", "submit", (e) => previewPrune({ scope: e.target.scope.value, value: e.target.value.value.trim(), source: e.target.source.value.trim() }));
  on("#prune-go", "click", confirmPrune);
  on("#prune-cancel", "click", closePrune);
  window.addEventListener("hashchange", show);
  try { await loadAgents(); } catch (error) { fail(error); }
  await show();
  document.body.dataset.ready = "true";
}

start();
