-- quarantine_release.lua: let quarantined conversations be flushed again now.
--
-- KEYS[1]  the quarantine set
-- KEYS[2]  the due set
-- ARGV[1]  now (ms)
-- ARGV[2]  the conversation hash key prefix (hash key = prefix .. conversation)
-- ARGV[3..] the conversations
--
-- Returns how many of them were quarantined (and are released now).
local now, n = tonumber(ARGV[1]), 0
for i = 3, #ARGV do
  local member = ARGV[i]
  if redis.call('ZREM', KEYS[1], member) == 1 then
    redis.call('HDEL', ARGV[2] .. member, 'quarantined', 'quarantined_at', 'failures',
               'attempts', 'retry_at')
    redis.call('ZADD', KEYS[2], now, member)
    n = n + 1
  end
end
return n
