-- upgrade_move_conversation.lua: move a conversation of the previous layout to its new key.
-- Without a conversation at the new key, its keys are renamed (expiries, a live lease,
-- in-flight points and the due time come along). With one (two spellings of one agent), the
-- buffers are merged (each message once, in timestamp order); the generation moves on, so a
-- flush in flight takes its points back; both open chunks' points are taken back by the next
-- flush.
--
-- KEYS[1..3]  the old conversation hash, buffer, lease
-- KEYS[4..6]  the new conversation hash, buffer, lease
-- KEYS[7]  the due set
-- KEYS[8]  the new agent's conversations set
-- KEYS[9]  the old agent's conversations set
-- ARGV[1]  the old member
-- ARGV[2]  the new member
-- ARGV[3]  now (ms): the due time of a merge with no known one
-- ARGV[4..] the points of both conversations' stored open chunks
--
-- Returns 1.
local old_member, new_member = ARGV[1], ARGV[2]
local score = redis.call('ZSCORE', KEYS[7], old_member)
if redis.call('EXISTS', KEYS[4]) + redis.call('EXISTS', KEYS[5]) == 0 then
  for i = 1, 3 do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('RENAME', KEYS[i], KEYS[i + 3]) end
  end
  if score then redis.call('ZADD', KEYS[7], score, new_member) end
else
  -- One buffer in timestamp order (arrival order within a spelling is kept on ties).
  local merged, have = {}, {}
  for _, list_key in ipairs({KEYS[5], KEYS[2]}) do
    for _, raw in ipairs(redis.call('LRANGE', list_key, 0, -1)) do
      local m = cjson.decode(raw)
      if not have[m['i']] then
        have[m['i']] = true
        table.insert(merged, {tonumber(m['ts']), #merged, raw, tonumber(m['z'] or 0)})
      end
    end
  end
  table.sort(merged, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  redis.call('DEL', KEYS[5])
  local chars = 0
  for _, item in ipairs(merged) do
    redis.call('RPUSH', KEYS[5], item[3])
    chars = chars + item[4]
  end
  redis.call('HSET', KEYS[4], 'chars', chars)
  local taken = {}
  for _, meta in ipairs({KEYS[4], KEYS[1]}) do
    local raw = redis.call('HGET', meta, 'inflight')
    if raw then for _, p in ipairs(cjson.decode(raw)) do table.insert(taken, p) end end
  end
  for i = 4, #ARGV do table.insert(taken, ARGV[i]) end
  if #taken > 0 then redis.call('HSET', KEYS[4], 'inflight', cjson.encode(taken)) end
  for _, f in ipairs({'newest', 'last'}) do
    local a = tonumber(redis.call('HGET', KEYS[4], f) or '0')
    local b = tonumber(redis.call('HGET', KEYS[1], f) or '0')
    if b > a then redis.call('HSET', KEYS[4], f, b) end
  end
  redis.call('HINCRBY', KEYS[4], 'gen', 1)
  redis.call('HSET', KEYS[4], 'written', 0)
  local current = redis.call('ZSCORE', KEYS[7], new_member)
  local due = score or current or ARGV[3]
  if current and tonumber(current) < tonumber(due) then due = current end
  redis.call('ZADD', KEYS[7], due, new_member)
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
end
redis.call('ZREM', KEYS[7], old_member)
redis.call('SREM', KEYS[9], old_member)
redis.call('SADD', KEYS[8], new_member)
return 1
