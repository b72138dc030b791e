-- edit_done.lua: a worker rewrote the written chunks of some edits (workers/edits.py). Each
-- edit leaves the edits hash unless a newer one replaced it meanwhile (that one waits for the
-- next round); the messages the rewrite emptied are kept to come back.
--
-- KEYS[1]  the agent's edits hash (edit field -> stored JSON)
-- KEYS[2]  the set of collections with edits waiting
-- KEYS[3]  the agent's emptied hash (edit field -> the stored JSON the message had)
-- ARGV[1]  JSON: collection, done ({field = the stored JSON applied}), emptied ({field = its
--          record before})
--
-- Returns how many edits still wait.
local a = cjson.decode(ARGV[1])
for field, line in pairs(a.done) do
  if redis.call('HGET', KEYS[1], field) == line then redis.call('HDEL', KEYS[1], field) end
end
for field, line in pairs(a.emptied) do redis.call('HSET', KEYS[3], field, line) end
local left = redis.call('HLEN', KEYS[1])
if left == 0 then redis.call('SREM', KEYS[2], a.collection) end
return left
