-- commit.lua: apply a flush, if the lease still holds and no delete ran meanwhile.
--
-- KEYS[1]  the conversation's lease (string: the holder's token)
-- KEYS[2]  the conversation's hash (its meta)
-- KEYS[3]  the conversation's buffer (list of stored message JSON)
-- KEYS[4]  the due set
-- KEYS[5]  the dead-letter list
-- KEYS[6]  the agent's stats hash (last_write)
-- ARGV[1]  JSON: token, now (ms), member (the conversation key), gen (the generation the flush
--          began with, a string), consumed (messages written, to drop from the buffer's head),
--          consumed_chars, open_count (messages of the open chunk), written (how many of the
--          buffer are stored as written now), idle_ms, wrote_points (0/1), forced (the force
--          requests the flush saw)
-- ARGV[2..] dead letters to append, as stored JSON
--
-- Returns 1 done, 0 the lease is lost (nothing changed), -1 the conversation changed (a delete
-- ran): the lease stays with the caller, who takes its points back.
local a = cjson.decode(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.token then return 0 end
local now, member = a.now, a.member
if (redis.call('HGET', KEYS[2], 'gen') or '0') ~= a.gen then
  -- A delete ran meanwhile. The lease stays with this worker until it has taken its points
  -- back (settle); the open chunk is no longer known to be stored as it is.
  redis.call('HSET', KEYS[2], 'written', 0)
  return -1
end
local open_count, written = a.open_count, a.written
if a.consumed > 0 then
  redis.call('LTRIM', KEYS[3], a.consumed, -1)
  redis.call('HINCRBY', KEYS[2], 'chars', -a.consumed_chars)
end
for d = 2, #ARGV do redis.call('RPUSH', KEYS[5], ARGV[d]) end
redis.call('HSET', KEYS[2], 'written', written)
if written > 0 then
  -- The open chunk's point is stored under its first message's id: `head` keeps it, so it is
  -- still retired when that message leaves after an edit, a delete or a take-back set
  -- `written` to 0 and left the point stored (save.lua, forget.lua).
  local ok, first = pcall(cjson.decode, redis.call('LINDEX', KEYS[3], 0) or '')
  if ok and type(first) == 'table' and type(first.i) == 'string' then
    redis.call('HSET', KEYS[2], 'head', first.i)
  end
end
redis.call('HDEL', KEYS[2], 'attempts', 'inflight', 'retry_at', 'failures')
-- Only the force requests this flush saw are met; one made while it ran still stands.
local force = tonumber(redis.call('HGET', KEYS[2], 'force') or '0')
if a.forced > 0 then force = redis.call('HINCRBY', KEYS[2], 'force', -a.forced) end
if force <= 0 then redis.call('HDEL', KEYS[2], 'force') end
if a.wrote_points > 0 then redis.call('HSET', KEYS[6], 'last_write', now) end
local left = redis.call('LLEN', KEYS[3])
if left == 0 or (left == open_count and written == left) then
  redis.call('ZREM', KEYS[4], member)
  redis.call('HDEL', KEYS[2], 'force')
elseif left > open_count or force > 0 then
  redis.call('ZADD', KEYS[4], now, member)
else
  local last = tonumber(redis.call('HGET', KEYS[2], 'last') or now)
  redis.call('ZADD', KEYS[4], last + a.idle_ms, member)
end
redis.call('DEL', KEYS[1])
return 1
