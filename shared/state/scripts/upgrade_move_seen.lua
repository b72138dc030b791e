-- upgrade_move_seen.lua: move a dedupe marker of the previous layout to its new keys. A
-- tombstone (no expiry) wins over a mark that expires, and the longer of two expiries is
-- kept: what was refused stays refused.
--
-- KEYS[1]  the old marker
-- KEYS[2..] its new places
--
-- Returns 1 if moved, 0 if the old marker was gone.
local value = redis.call('GET', KEYS[1])
if not value then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
for i = 2, #KEYS do
  local there = redis.call('PTTL', KEYS[i])
  if there == -2 then
    if ttl > 0 then redis.call('SET', KEYS[i], value, 'PX', ttl)
    else redis.call('SET', KEYS[i], value) end
  elseif there > 0 then
    if ttl == -1 then redis.call('SET', KEYS[i], value)
    elseif ttl > there then redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
redis.call('DEL', KEYS[1])
return 1
