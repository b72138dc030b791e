-- begin.lua: start a flush: renew the lease and read the conversation.
--
-- KEYS[1]  the conversation's lease (string: the holder's token)
-- KEYS[2]  the conversation's hash (its meta)
-- KEYS[3]  the conversation's buffer (list of stored message JSON)
-- KEYS[4]  the due set
-- ARGV[1]  JSON: token (the claim's), lease_ms, now (ms), member (the conversation key)
--
-- Returns {HGETALL of the hash, LRANGE of the buffer}, or false if the lease is not ours.
local a = cjson.decode(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.token then return false end
redis.call('PEXPIRE', KEYS[1], a.lease_ms)
redis.call('ZADD', KEYS[4], a.now + a.lease_ms, a.member)
return {redis.call('HGETALL', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1)}
