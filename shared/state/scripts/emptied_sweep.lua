-- emptied_sweep.lua: forget the emptied records whose dedupe mark is gone. A record keeps an
-- emptied message's old text to bring it back on an edit to a long text; once its mark has
-- expired the id is unknown (a re-send is a new message), so nothing can bring it back.
--
-- KEYS[1]  the agent's emptied hash (edit field -> the stored JSON the message had)
-- ARGV[1]  the agent's dedupe mark prefix: a field's mark is ARGV[1] .. field
-- ARGV[2..]  the fields to look at
--
-- Returns how many records went.
local gone = 0
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. ARGV[i]) == 0 then
    gone = gone + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return gone
