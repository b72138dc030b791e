-- force.lua: mark every conversation of an agent with buffered messages to be written now.
--
-- KEYS[1]  the agent's conversation set
-- KEYS[2]  the due set
-- ARGV[1]  JSON: now (ms), meta_prefix and buffer_prefix (a conversation's hash and buffer keys
--          are the prefix .. the conversation key)
--
-- Returns how many conversations were marked.
local a = cjson.decode(ARGV[1])
local n = 0
for _, member in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local meta = a.meta_prefix .. member
  if redis.call('EXISTS', meta) == 1 and redis.call('LLEN', a.buffer_prefix .. member) > 0 then
    redis.call('HINCRBY', meta, 'force', 1)
    local current = tonumber(redis.call('ZSCORE', KEYS[2], member))
    if current == nil or current > a.now then
      redis.call('ZADD', KEYS[2], a.now, member)
    end
    n = n + 1
  end
end
return n
