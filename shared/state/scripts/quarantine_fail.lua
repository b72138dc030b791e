-- quarantine_fail.lua: count one failed flush of a leased conversation; quarantine it at the
-- threshold, else give it back to be tried later.
--
-- KEYS[1]  the conversation's lease
-- KEYS[2]  the conversation hash (shared/state/conversation_meta.py names its fields)
-- KEYS[3]  the due set (zset: conversation -> when its flush is due, ms)
-- KEYS[4]  the quarantine set (zset: conversation -> since, ms)
-- ARGV[1]  JSON:
--   token       the lease token the failing flush holds
--   now         ms since the epoch
--   member      the conversation (member of the sets)
--   reason      the reason shown to operators
--   threshold   failures in a row that quarantine it (1: at once)
--   retry_ms    when to try again, from now
--   generation  the generation the flush read ('' for none): a delete meanwhile means the
--               failure is not counted, the conversation is just due again
--
-- Returns 0: the lease is not held (nothing changed); 1: given back for a retry;
-- 2: quarantined; 3: changed by a delete meanwhile, due again, not counted.
local a = cjson.decode(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.token then return 0 end
local now, member = a.now, a.member
if a.generation ~= '' and (redis.call('HGET', KEYS[2], 'gen') or '0') ~= a.generation then
  redis.call('ZADD', KEYS[3], now, member)
  redis.call('DEL', KEYS[1])
  return 3
end
local failures = redis.call('HINCRBY', KEYS[2], 'failures', 1)
if failures >= a.threshold then
  redis.call('HSET', KEYS[2], 'quarantined', a.reason, 'quarantined_at', now)
  redis.call('ZADD', KEYS[4], now, member)
  redis.call('ZREM', KEYS[3], member)
  redis.call('DEL', KEYS[1])
  return 2
end
local due_at = now + a.retry_ms
redis.call('ZADD', KEYS[3], due_at, member)
redis.call('HINCRBY', KEYS[2], 'attempts', 1)
redis.call('HSET', KEYS[2], 'retry_at', due_at)
redis.call('DEL', KEYS[1])
return 1
