-- marks_restore.lua: restore an export's tombstones and dedupe marks. A tombstone always wins;
-- a mark is written where none is, or gets the later expiry of the two. Redis 6.0 commands.
--
-- KEYS[i]  a marker key
-- ARGV[1]  now (ms)
-- ARGV[2i], ARGV[2i+1]  KEYS[i]'s value and expiry (Unix ms; negative: none, a tombstone)
--
-- Returns how many keys were given.
local now = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local value, expires = ARGV[2 * i], tonumber(ARGV[2 * i + 1])
  if expires < 0 then
    redis.call('SET', key, value)
  else
    local left, wanted = redis.call('PTTL', key), expires - now
    if wanted > 0 then
      if left == -2 then
        redis.call('SET', key, value, 'PX', wanted)
      elseif left >= 0 and left < wanted then
        redis.call('PEXPIRE', key, wanted)
      end
    end
  end
end
return #KEYS
