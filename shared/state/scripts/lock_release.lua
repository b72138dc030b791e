-- lock_release.lua: give a lock back only if this holder still holds it. Compare and delete in
-- one step: a holder whose lock expired and was taken by another process must not delete the
-- other's lock (a GET then a DEL could, between the two calls).
--
-- KEYS[1]  the lock
-- ARGV[1]  the holder's token
--
-- Returns 1 if released, 0 if the lock was another's (or gone).
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
