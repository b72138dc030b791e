-- invalidate.lua: a delete removed the stored point of a conversation's open chunk: nothing of
-- the buffer is stored as written any more (a flush that wrote it again meanwhile takes its
-- points back: the generation), and the chunk is written anew when it is due.
--
-- KEYS[1]  the conversation hash
-- KEYS[2]  the conversation's buffer
-- KEYS[3]  the due set
-- KEYS[4]  the quarantine set
-- ARGV[1]  the conversation (member of the sets)
-- ARGV[2]  now (ms)
--
-- Returns 1.
redis.call('HSET', KEYS[1], 'written', 0)
redis.call('HINCRBY', KEYS[1], 'gen', 1)
if redis.call('LLEN', KEYS[2]) > 0 and not redis.call('ZSCORE', KEYS[4], ARGV[1]) then
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
end
return 1
