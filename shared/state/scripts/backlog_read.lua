-- backlog_read.lua: what the backlog gauges need of many conversations, in one call.
--
-- ARGV[1]  the buffer key prefix (buffer key = prefix .. conversation)
-- ARGV[2]  the conversation hash key prefix
-- ARGV[3..] the conversations
--
-- Returns one string: per conversation "n written ts": buffered messages, how many of them
-- are stored (the open chunk's `written`), and the timestamp of the first message not stored
-- yet (-1 if none, or for an import: its messages carry the chat's own old dates).
local out = {}
for i = 3, #ARGV do
  local buf = ARGV[1] .. ARGV[i]
  local n = redis.call('LLEN', buf)
  local meta = redis.call('HMGET', ARGV[2] .. ARGV[i], 'written', 'noidle')
  local written = tonumber(meta[1] or '0') or 0
  local ts = -1
  if n > written and meta[2] ~= '1' then
    local ok, message = pcall(cjson.decode, redis.call('LINDEX', buf, written) or '')
    if ok and type(message) == 'table' and tonumber(message.ts) then ts = tonumber(message.ts) end
  end
  table.insert(out, string.format('%d %d %d', n, written, ts))
end
-- One string: parsing thousands of integer replies was most of the scrape's Python time.
return table.concat(out, ' ')
