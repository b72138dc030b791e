-- message_lib.lua: what the scripts that change buffered messages share (prepended to them by
-- shared/state/scripts/__init__.py; it reads no KEYS or ARGV itself).

-- code points, as Python's len counts them (the chunker's sizes)
local function chars(s)
  local _, n = string.gsub(s, '[^\128-\191]', '')
  return n
end

-- where the text of a stored JSON line is: `,"t":` to `,"s":` (stored_json's key order; a
-- quote inside a JSON string is always escaped, so neither can occur inside one)
local function text_span(raw)
  local head = string.find(raw, ',"t":', 1, true)
  local tail = string.find(raw, ',"s":', 1, true)
  if head and tail and tail > head then return head + 5, tail - 1 end
end

-- The stored line `raw` (decoded: `old`) with the text of `line` (decoded: `m`), and its new
-- size; nil when either is not stored_json's layout. Spliced, never re-encoded: cjson would
-- reorder the keys and round `ts`.
local function with_text(raw, old, line, m)
  local from, to = text_span(raw)
  local new_from, new_to = text_span(line)
  if not from or not new_from then return nil end
  local z = (tonumber(m.z) or 0) - chars(m.s or '') + chars(old.s or '')
  local rest = string.gsub(string.sub(raw, to + 1), ',"z":%d+', ',"z":' .. z, 1)
  return string.sub(raw, 1, from - 1) .. string.sub(line, new_from, new_to) .. rest, z
end

-- the position, line and record of message `id` in a buffer, looked for from the newest back
-- a page at a time: clients edit recent messages (the plugin re-sends its last 30), and a
-- buffer that grew long (an outage, an import) must not be read whole for each edit
-- A stored line starts with its id as the encoder wrote it (`{"i":"<id>",`; the scripts never
-- re-encode a line): a line is decoded only when it starts as the edit's own line does.
local function id_prefix(line)
  local head = string.find(line, ',"t":', 1, true)
  if head then return string.sub(line, 1, head) end
end

local function find(buf, id, line)
  local prefix = id_prefix(line)
  local stop = redis.call('LLEN', buf)
  while stop > 0 do
    local start = math.max(stop - 64, 0)
    local items = redis.call('LRANGE', buf, start, stop - 1)
    for k = #items, 1, -1 do
      local raw = items[k]
      if prefix == nil or string.sub(raw, 1, #prefix) == prefix then
        local ok, m = pcall(cjson.decode, raw)
        if ok and type(m) == 'table' and m.i == id then return start + k, raw, m end
      end
    end
    stop = start
  end
end

-- the id of a buffer's first message ('' when there is none or it cannot be read)
local function first_id(buf)
  local raw = redis.call('LINDEX', buf, 0)
  if not raw then return '' end
  local ok, m = pcall(cjson.decode, raw)
  if ok and type(m) == 'table' and type(m.i) == 'string' then return m.i end
  return ''
end

-- A conversation with new or changed messages is flushed when a chunk may close (now), else
-- once it has gone quiet; a quarantined one waits for its release, a backing-off one keeps
-- its retry time.
local function schedule(at, meta, member, idle_ms, close_now)
  if redis.call('ZSCORE', at.quarantine, member) then return end
  local target = at.now + idle_ms
  if close_now then target = at.now end
  local retry_at = tonumber(redis.call('HGET', meta, 'retry_at') or '0')
  if target < retry_at then target = retry_at end
  local current = tonumber(redis.call('ZSCORE', at.due, member))
  if current == nil or current > at.now then redis.call('ZADD', at.due, target, member) end
end

-- An emptied message comes back with the text of `line` (decoded: `m`): its record from the
-- emptied hash (speaker, time, ids of its first version) joins its conversation's buffer, as
-- the newest message. False when there is none to bring back.
local function bring_back(at, emptied, field, member, line, m, idle_ms, min_chars)
  local stash = redis.call('HGET', emptied, field)
  if not stash then return false end
  local ok, old = pcall(cjson.decode, stash)
  if not ok or type(old) ~= 'table' then return false end
  local raw, z = with_text(stash, old, line, m)
  if not raw then return false end
  local meta, buf = at.meta_prefix .. member, at.buf_prefix .. member
  if find(buf, old.i, stash) then return true end -- already back
  redis.call('RPUSH', buf, raw)
  redis.call('HDEL', emptied, field)
  local size = redis.call('HINCRBY', meta, 'chars', z)
  local newest = tonumber(redis.call('HGET', meta, 'newest') or '0')
  if (tonumber(old.ts) or 0) > newest then
    redis.call('HSET', meta, 'newest', string.format('%d', old.ts))
  end
  redis.call('HSET', meta, 'last', at.now)
  schedule(at, meta, member, idle_ms, size >= min_chars)
  return true
end
