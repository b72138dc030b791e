-- quarantine_fail.lua: count one failed flush of a leased conversation; quarantine it at the
-- threshold, else give it back to be tried later.
--
-- KEYS[1]  the conversation's lease
-- KEYS[2]  the conversation hash (shared/conversation_meta.py names its fields)
-- KEYS[3]  the due set (zset: conversation -> when its flush is due, ms)
-- KEYS[4]  the quarantine set (zset: conversation -> since, ms)
-- ARGV[1]  the lease token the failing flush holds
-- ARGV[2]  now (ms)
-- ARGV[3]  the conversation (member of the sets)
-- ARGV[4]  the reason shown to operators
-- ARGV[5]  the threshold: failures in a row that quarantine it (1: at once)
-- ARGV[6]  retry in (ms)
-- ARGV[7]  the generation the flush read ('' for none): a delete meanwhile means the
--          failure is not counted, the conversation is just due again
--
-- Returns 0: the lease is not held (nothing changed); 1: given back for a retry;
-- 2: quarantined; 3: changed by a delete meanwhile, due again, not counted.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local now, member = tonumber(ARGV[2]), ARGV[3]
if ARGV[7] ~= '' and (redis.call('HGET', KEYS[2], 'gen') or '0') ~= ARGV[7] then
  redis.call('ZADD', KEYS[3], now, member)
  redis.call('DEL', KEYS[1])
  return 3
end
local failures = redis.call('HINCRBY', KEYS[2], 'failures', 1)
if failures >= tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[2], 'quarantined', ARGV[4], 'quarantined_at', now)
  redis.call('ZADD', KEYS[4], now, member)
  redis.call('ZREM', KEYS[3], member)
  redis.call('DEL', KEYS[1])
  return 2
end
local due_at = now + tonumber(ARGV[6])
redis.call('ZADD', KEYS[3], due_at, member)
redis.call('HINCRBY', KEYS[2], 'attempts', 1)
redis.call('HSET', KEYS[2], 'retry_at', due_at)
redis.call('DEL', KEYS[1])
return 1
