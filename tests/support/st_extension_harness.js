// Runs st-qdrant-memory's own index.js in node, as SillyTavern's page runs it, with only the
// page's globals stubbed (SillyTavern.getContext, localStorage, toastr, jQuery, the two
// SillyTavern endpoints its chat indexing reads); every Qdrant and embeddings call is a real
// fetch. Usage: node st_extension_harness.js <index.js> < scenario.json; prints one JSON line.
//
// The scenario: {settings, character, persona, chats: {file: [messages]}, live: [messages],
// recallChat: [messages], steps: [...]}; steps are run in order, each result kept by name.
"use strict"

const fs = require("fs")
const vm = require("vm")

const indexPath = process.argv[2]
const scenario = JSON.parse(fs.readFileSync(0, "utf8"))
const qdrantUrl = scenario.settings.qdrantUrl

const calls = [] // every call to Qdrant: [method, path under the Qdrant URL, status]
const toasts = [] // [kind, message]
const problems = [] // what index.js logged as errors and warnings
const storage = new Map([["qdrant-memory", JSON.stringify(scenario.settings)]])
const stContext = {
  chat: [],
  name1: scenario.persona,
  name2: scenario.character,
  characters: [{ name: scenario.character, avatar: `${scenario.character}.png` }],
  getRequestHeaders: () => ({ "Content-Type": "application/json" }),
}

function answer(body) {
  return new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json" } })
}

// SillyTavern's own endpoints (chat list, chat file) answer from the scenario; the rest is real
async function pageFetch(url, options = {}) {
  if (url === "/api/characters/chats") {
    return answer(Object.keys(scenario.chats).map((file_name) => ({ file_name })))
  }
  if (url === "/api/chats/get") {
    const { file_name } = JSON.parse(options.body)
    return answer(scenario.chats[`${file_name}.jsonl`])
  }
  const response = await fetch(url, options)
  if (url.startsWith(qdrantUrl)) {
    calls.push([options.method || "GET", url.slice(qdrantUrl.length), response.status])
  }
  return response
}

// jQuery, for the modal of chat indexing: every call and property chains, nothing is shown
const $ = new Proxy(function () {}, {
  get: (_, name) => (name === "length" ? 0 : $),
  apply: () => $,
})
const toast = (kind) => (message) => toasts.push([kind, String(message)])

const page = {
  console: {
    log: () => {},
    info: () => {},
    warn: (...args) => problems.push(["warn", args.map(String).join(" ")]),
    error: (...args) => problems.push(["error", args.map(String).join(" ")]),
  },
  fetch: pageFetch,
  Response,
  localStorage: {
    getItem: (key) => (storage.has(key) ? storage.get(key) : null),
    setItem: (key, value) => storage.set(key, String(value)),
  },
  SillyTavern: { getContext: () => stContext },
  toastr: { info: toast("info"), success: toast("success"), warning: toast("warning"), error: toast("error") },
  $,
  jQuery: () => {}, // the extension's start (its settings page, its event hooks) is not run
  location: { origin: "http://127.0.0.1:8000" },
  document: { title: "SillyTavern", cookie: "", querySelector: () => null },
  setTimeout,
  clearTimeout,
  setInterval,
  clearInterval,
}
page.window = page
vm.createContext(page)
vm.runInContext(fs.readFileSync(indexPath, "utf8"), page, { filename: "index.js" })
page.loadSettings()

const character = scenario.character
const collection = page.getCollectionName(character)

function liveChunk() {
  const messages = scenario.live.map((m, i) => ({
    text: m.mes,
    characterName: character,
    isUser: m.is_user,
    messageId: `${character}_${m.send_date}_${i}`,
    timestamp: m.send_date,
  }))
  return page.createChunkFromMessages(messages)
}

const STEPS = {
  // the settings page's "Test connection": GET /collections, reads result.collections
  async connection() {
    const response = await fetch(`${qdrantUrl}/collections`, { headers: page.getQdrantHeaders() })
    const body = await response.json()
    return { status: response.status, collections: body.result?.collections?.length ?? null }
  },
  // "Index character chats": every chat file chunked, chunks already held skipped
  async index() {
    const before = toasts.length
    await page.indexCharacterChats()
    return toasts.slice(before).map(([kind, message]) => `${kind}: ${message}`)
  },
  // a live chunk saved twice: the second is a duplicate (a point with cosine >= 0.92 exists)
  async live() {
    const chunk = liveChunk()
    return [await page.saveChunkToQdrant(chunk, [character]), await page.saveChunkToQdrant(chunk, [character])]
  },
  // the generation interceptor: recalls for the last user message, injects the block
  async recall() {
    const chat = scenario.recallChat.map((m) => ({ ...m }))
    stContext.chat = chat
    await page.qdrantMemoryInterceptor(chat, 8192, null, "normal")
    return chat.filter((m) => m.is_system).map((m) => m.mes)
  },
  async info() {
    const info = await page.getCollectionInfo(collection)
    return info && { points: info.points_count, size: info.config?.params?.vectors?.size }
  },
  // the memory viewer's "Delete All Memories"
  async deleteAll() {
    return await page.deleteCollection(collection)
  },
}

async function main() {
  const results = {}
  for (const step of scenario.steps) {
    results[step] = await STEPS[step]()
  }
  process.stdout.write(JSON.stringify({ collection, results, calls, toasts, problems }) + "\n")
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`)
  process.exit(1)
})
