// DOM and API helpers of the memory viewer. Every piece of data reaches the page as a text
// node (textContent / createTextNode), never as markup: chunk text is user content.

const KEY_STORE = "memory-pool-key";

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = String(value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function $(selector) {
  return document.querySelector(selector);
}

// Each finished render bumps its container's data-version: a test (or a person's script) can
// tell a fresh result from the previous one.
export function rendered(node) {
  node.dataset.version = String(Number(node.dataset.version || 0) + 1);
}

export function status(message, kind = "") {
  const line = $("#status");
  line.textContent = message || "";
  line.className = kind;
}

export function isoDate(ms) {
  return ms === null || ms === undefined ? "" : new Date(ms).toISOString().slice(0, 10);
}

export function isoTime(ms) {
  return ms === null || ms === undefined ? "never" : new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

// A date input's value as Unix ms: the start of that UTC day, or its last millisecond.
export function dayMs(value, endOfDay) {
  if (!value) return null;
  const start = Date.parse(value + "T00:00:00Z");
  return Number.isNaN(start) ? null : start + (endOfDay ? 86399999 : 0);
}

export const key = {
  get: () => sessionStorage.getItem(KEY_STORE),
  set: (value) => sessionStorage.setItem(KEY_STORE, value),
  forget: () => sessionStorage.removeItem(KEY_STORE),
};

export class ApiError extends Error {
  constructor(status, error, detail) {
    super(`${status} ${error}: ${detail}`);
    this.status = status;
    this.error = error;
    this.detail = detail;
  }
}

// One call to the JSON API, with the session's key; errors become ApiError with the server's
// {error, detail}. A 401 opens the key form.
export async function api(method, path, { query, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(name, value);
  }
  const headers = { Accept: "application/json" };
  const stored = key.get();
  if (stored) headers.Authorization = "Bearer " + stored;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit", cache: "no-store",
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new ApiError(response.status, data.error || "http_error", data.detail || response.statusText);
    if (response.status === 401) document.dispatchEvent(new CustomEvent("needs-key", { detail: error }));
    throw error;
  }
  return data;
}

export function agentPath(bot, rest) {
  return `/agents/${encodeURIComponent(bot)}${rest}`;
}
