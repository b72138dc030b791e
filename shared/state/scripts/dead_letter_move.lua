-- dead_letter_move.lua: move one dead letter to the replay queue, only if it is still there
-- (two replay requests never queue one letter twice).
--
-- KEYS[1]  the dead letters (list of JSON)
-- KEYS[2]  the replay queue (list of JSON)
-- ARGV[1]  the dead letter's JSON, byte for byte
--
-- Returns 1 if moved, 0 if it was no longer among the dead letters.
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  return 1
end
return 0
