-- dead_letter_replace.lua: replace one dead letter by its edited version (or drop it when the
-- edit left it no message), only if it is still where it was read: a replay request may have
-- moved it meanwhile, and then the edit is tried again later.
--
-- KEYS[1]  the list it was read from (the dead letters, or the replay queue)
-- ARGV[1]  the letter's JSON as read, byte for byte
-- ARGV[2]  the edited letter's JSON; empty: the letter goes
--
-- Returns 1 if replaced, 0 if it was no longer there.
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[1], ARGV[2]) end
  return 1
end
return 0
