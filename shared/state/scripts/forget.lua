-- forget.lua: a delete in one conversation's buffer. Removes the matching messages only (their
-- chunk-mates stay); bumps the generation so an in-flight flush takes its points back; a
-- quarantined conversation is released (the delete may be its fix).
--
-- KEYS[1]  the conversation hash
-- KEYS[2]  the conversation's buffer (list of stored message JSON)
-- KEYS[3]  the due set
-- KEYS[4]  the quarantine set
-- ARGV[1]  mode: 'all', 'ids' (message ids) or 'user' (user ids)
-- ARGV[2]  the conversation (member of the sets)
-- ARGV[3]  now (ms)
-- ARGV[4..] the ids the mode matches
--
-- Returns {removed, open, inflight, left}: the removed messages' stored JSON (empty: nothing
-- matched, nothing changed); when a removed one was in the written open chunk (or that chunk's
-- point is stored and stale, `head`), the id of that chunk's first message (its point's id
-- came from it: the caller deletes that point, the next flush writes the chunk anew), else '';
-- the points a flush wrote without committing (JSON), or ''; how many messages are left in the
-- buffer.
local mode, member, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local wanted = {}
for i = 4, #ARGV do wanted[ARGV[i]] = true end
local items = redis.call('LRANGE', KEYS[2], 0, -1)
local written = tonumber(redis.call('HGET', KEYS[1], 'written') or '0')
-- A record no flush can read (not JSON, not an object: written by older code) must not stop
-- the delete that is the fix of its quarantined conversation: it matches only 'all'.
local function record(raw)
  local ok, m = pcall(cjson.decode, raw)
  if ok and type(m) == 'table' then return m end
  return {}
end
local function matches(raw)
  if mode == 'all' then return true end
  local m = record(raw)
  if mode == 'ids' then return m['i'] ~= nil and wanted[m['i']] == true end
  return m['u'] ~= nil and wanted[m['u']] == true
end
-- An edit or a delete may have set `written` to 0 and left the open chunk's point stored,
-- under the id of its first message (`head`, commit.lua): that point is a copy of the buffer.
local first = items[1] and record(items[1])['i']
local stored = written == 0 and first ~= nil and redis.call('HGET', KEYS[1], 'head') == first
local removed, kept, chars, open = {}, {}, 0, ''
for idx, raw in ipairs(items) do
  if matches(raw) then
    table.insert(removed, raw)
    if idx <= written or stored then open = first or '' end
  else
    table.insert(kept, raw)
    chars = chars + (tonumber(record(raw)['z']) or 0)
  end
end
if #removed == 0 then return {{}, '', '', #items} end
redis.call('DEL', KEYS[2])
for _, raw in ipairs(kept) do redis.call('RPUSH', KEYS[2], raw) end
redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('HSET', KEYS[1], 'chars', chars)
-- The open chunk's stored point (if any) no longer matches the buffer: rewrite it.
redis.call('HSET', KEYS[1], 'written', 0)
-- A delete may be the fix of a quarantined conversation (its bad message gone): it leaves
-- the quarantine and is tried again; still failing, it returns there.
if redis.call('ZREM', KEYS[4], member) == 1 then
  redis.call('HDEL', KEYS[1], 'quarantined', 'quarantined_at', 'failures', 'attempts', 'retry_at')
end
if #kept == 0 then
  redis.call('ZREM', KEYS[3], member)
else
  redis.call('ZADD', KEYS[3], now, member)
end
return {removed, open, redis.call('HGET', KEYS[1], 'inflight') or '', #kept}
