-- renew.lua: keep the lease before a slow step, noting the points about to be written.
--
-- KEYS[1]  the conversation's lease (string: the holder's token)
-- KEYS[2]  the conversation's hash (its meta)
-- KEYS[3]  the due set
-- ARGV[1]  JSON: token, lease_ms, now (ms), member (the conversation key),
--          gen (the generation the flush began with, a string), inflight (JSON list of the
--          point ids about to be written, or '' for none)
--
-- Returns 1 kept, 0 the lease is lost, -1 the conversation changed (a delete ran).
local a = cjson.decode(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.token then return 0 end
if (redis.call('HGET', KEYS[2], 'gen') or '0') ~= a.gen then return -1 end
redis.call('PEXPIRE', KEYS[1], a.lease_ms)
redis.call('ZADD', KEYS[3], a.now + a.lease_ms, a.member)
-- The points this flush is about to write: if it dies or is overtaken before its commit, the
-- next flush takes them back first (they may hold messages deleted meanwhile).
if a.inflight ~= '' then redis.call('HSET', KEYS[2], 'inflight', a.inflight) end
return 1
