-- claim.lua: lease up to `max` conversations whose flush is due and that no worker holds.
--
-- KEYS[1]  the due set (zset: conversation -> when its flush is due, ms)
-- KEYS[2]  the quarantine set (zset of conversations set aside)
-- ARGV[1]  JSON: now (ms), lease_ms (the lease's life), max (how many at most),
--          lease_prefix (a conversation's lease key = lease_prefix .. conversation),
--          token_base (unique per call; each lease's token is token_base .. ':' .. n)
--
-- Returns a flat list {conversation, token, conversation, token, ...} of the claimed ones.
local a = cjson.decode(ARGV[1])
local now, ttl = a.now, a.lease_ms
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, a.max)
local claimed = {}
for n, member in ipairs(members) do
  local lease = a.lease_prefix .. member
  local left = redis.call('PTTL', lease)
  if redis.call('ZSCORE', KEYS[2], member) then
    -- Quarantined (a save, a force flush or a delete made it due again): it waits for a
    -- release, never for a flush, so it cannot hold back the conversations batched with it.
    redis.call('ZREM', KEYS[1], member)
  elseif left > 0 then
    -- Busy elsewhere: look again when that lease would expire, so a dead worker's
    -- conversation is handed on within seconds and live ones are not polled.
    redis.call('ZADD', KEYS[1], now + left, member)
  else
    local token = a.token_base .. ':' .. n
    redis.call('SET', lease, token, 'PX', ttl)
    redis.call('ZADD', KEYS[1], now + ttl, member)
    table.insert(claimed, member)
    table.insert(claimed, token)
  end
end
return claimed
