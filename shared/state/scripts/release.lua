-- release.lua: give a conversation back, to be flushed again at `due_at`.
--
-- KEYS[1]  the conversation's lease (string: the holder's token)
-- KEYS[2]  the conversation's hash (its meta)
-- KEYS[3]  the due set
-- ARGV[1]  JSON: token, due_at (ms), member (the conversation key), failed (true: count an
--          attempt and keep `due_at` as its retry time, which saves respect)
--
-- Returns 1 released, 0 the lease is not ours (nothing changed).
local a = cjson.decode(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.token then return 0 end
redis.call('ZADD', KEYS[3], a.due_at, a.member)
if a.failed then
  redis.call('HINCRBY', KEYS[2], 'attempts', 1)
  redis.call('HSET', KEYS[2], 'retry_at', a.due_at)
end
redis.call('DEL', KEYS[1])
return 1
