-- edit_restore.lua: an edit back to a long text of a message no written chunk holds any more
-- (an earlier edit emptied it): it comes back into its conversation's buffer with its first
-- version's speaker and time (message_lib's bring_back). A deleted id stays deleted.
--
-- KEYS[1]  the agent's edits hash
-- KEYS[2]  the agent's emptied hash
-- KEYS[3]  the message's dedupe mark
-- KEYS[4]  the due set
-- KEYS[5]  the quarantine set
-- ARGV[1]  JSON: field, line (the edit's stored JSON, as in the edits hash), now,
--          meta_prefix, buf_prefix, idle_ms, min_chars
--
-- Returns 1 brought back, 0 nothing to bring back (the edit is dropped all the same).
local a = cjson.decode(ARGV[1])
local at = {now = a.now, due = KEYS[4], quarantine = KEYS[5], meta_prefix = a.meta_prefix,
  buf_prefix = a.buf_prefix}
local function drop()
  if redis.call('HGET', KEYS[1], a.field) == a.line then redis.call('HDEL', KEYS[1], a.field) end
end
-- replaced by a newer edit meanwhile: that one is applied next round
if redis.call('HGET', KEYS[1], a.field) ~= a.line then return 0 end
local value = redis.call('GET', KEYS[3])
if not value or value == 'deleted' then drop() return 0 end
local state, fp, expires, member = string.match(value, '^=(%a) (%x*) (%d+) (.+)$')
if not state then drop() return 0 end
local back = bring_back(at, KEYS[2], a.field, member, a.line, cjson.decode(a.line), a.idle_ms,
  a.min_chars)
if back then
  local left = redis.call('PTTL', KEYS[3])
  local mark = '=b ' .. fp .. ' ' .. expires .. ' ' .. member
  if left > 0 then redis.call('SET', KEYS[3], mark, 'PX', left) end
end
drop()
if back then return 1 end
return 0
