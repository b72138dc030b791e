-- forget_emptied.lua: a delete reaches the messages an edit took out of their chunks. They are
-- in no chunk and no buffer, only in the emptied hash (to come back with a long text): those
-- in the delete's scope leave it and are tombstoned, so no later edit brings them back.
--
-- KEYS[1]  the agent's emptied hash (edit field -> the stored JSON the message had)
-- ARGV[1]  JSON: mode ('ids': message ids of any source, 'user': user ids, 'source': every
--          message of a source, 'conversation': of one conversation), values (the ids),
--          source (a source as a key part, for 'source' and 'conversation'), conversation (its
--          key, for 'conversation'), seen_prefix (a message's dedupe key is this .. its field)
--
-- Returns the fields removed (a field is "<source>:<message id>", both escaped key parts).
local a = cjson.decode(ARGV[1])
local wanted = {}
for _, value in ipairs(a.values or {}) do wanted[value] = true end
local function conversation_of(field)
  local mark = redis.call('GET', a.seen_prefix .. field)
  if not mark then return nil end
  return string.match(mark, '^=%a %x* %d+ (.+)$')
end
local function matches(field, raw)
  local source = string.match(field, '^([^:]*):')
  if a.mode == 'source' then return source == a.source end
  if a.mode == 'conversation' then
    return source == a.source and conversation_of(field) == a.conversation
  end
  local ok, m = pcall(cjson.decode, raw)
  if not ok or type(m) ~= 'table' then return false end
  if a.mode == 'ids' then return m.i ~= nil and wanted[m.i] == true end
  return m.u ~= nil and wanted[m.u] == true
end
local removed = {}
local entries = redis.call('HGETALL', KEYS[1])
for n = 1, #entries, 2 do
  local field, raw = entries[n], entries[n + 1]
  if matches(field, raw) then
    redis.call('HDEL', KEYS[1], field)
    redis.call('SET', a.seen_prefix .. field, 'deleted')
    removed[#removed + 1] = field
  end
end
return removed
