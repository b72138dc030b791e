-- settle.lua: the points of an unfinished flush (and an open chunk's retired point) were taken
-- back: forget them, and that the open chunk was stored (its point may have been one of them).
--
-- KEYS[1]  the conversation's lease (string: the holder's token)
-- KEYS[2]  the conversation's hash (its meta)
-- ARGV[1]  JSON: token, retire (the open chunk's first message whose point was taken back,
--          or '')
--
-- Returns 1 done, 0 the lease is not ours (nothing changed).
local a = cjson.decode(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.token then return 0 end
redis.call('HDEL', KEYS[2], 'inflight')
-- an edit may have asked meanwhile to retire another point (save.lua): that one stays asked
if redis.call('HGET', KEYS[2], 'retire') == a.retire then redis.call('HDEL', KEYS[2], 'retire') end
redis.call('HSET', KEYS[2], 'written', 0)
return 1
