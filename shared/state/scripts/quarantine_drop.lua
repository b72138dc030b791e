-- quarantine_drop.lua: take a conversation out of the quarantine without making it due (its
-- messages were discarded).
--
-- KEYS[1]  the quarantine set
-- KEYS[2]  the conversation hash
-- ARGV[1]  the conversation
--
-- Returns 1 if it was quarantined, else 0.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], 'quarantined', 'quarantined_at', 'failures', 'attempts', 'retry_at')
return 1
