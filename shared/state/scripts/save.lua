-- save.lua: buffer the messages of one /save not seen before, atomically for the whole request.
--
-- KEYS[1]  the due set (zset: conversation -> when its flush is due, ms)
-- KEYS[2]  the agent's block key (string: the reason its saves are refused), if held
-- KEYS[3]  the agent names hash (collection -> canonical name)
-- KEYS[4]  the quarantine set (zset of conversations set aside)
-- ARGV[1]  the plan, JSON:
--   now         ms since the epoch
--   ttl         seconds a seen id is remembered (dedupe), counted from when it was last seen
--   refresh_ms  a re-sent id gets its full `ttl` back once this much of it has run down (or
--               when it is longer than `ttl`); optional, 0 (the default) renews on every re-send
--   collection  the agent's collection (its identity)
--   groups      one table per conversation, in order:
--     meta, buf, convs  the conversation's hash, buffer list, and its agent's conversation set
--     member            the conversation key (the due set's member)
--     agent             the agent's name as this request spells it
--     fields            {name = value}: the hash fields to set once (agent, source, cid, channel,
--                       guild, noidle); the empty ones are left out
--     min_chars, gap_ms, idle_ms   when the conversation becomes due
--     seen_prefix, ids  a message's dedupe key is seen_prefix .. its id (escaped as a key part)
-- ARGV[2]  the messages' stored JSON, one per line, in the order of the groups' ids (stored JSON
--          has no raw newline: json escapes it). Passed byte for byte and never re-encoded (cjson
--          would reorder it); only a new message's line is decoded, for its size `z` and `ts`,
--          so a re-sent known one costs one read (PTTL), and a refresh now and then.
--
-- Returns {accepted, duplicates}, or {-1, reason} when the agent is held (nothing changes).
local plan = cjson.decode(ARGV[1])
local reason = redis.call('GET', KEYS[2])
if reason then return {-1, reason} end
local now, due, lines = plan.now, KEYS[1], ARGV[2]
local ttl_ms, refresh_ms = plan.ttl * 1000, plan.refresh_ms or 0
local pos, accepted, dups = 1, 0, 0
for _, g in ipairs(plan.groups) do
  local meta, member = g.meta, g.member
  local newest = tonumber(redis.call('HGET', meta, 'newest') or '0')
  local added, added_size, gap = 0, 0, false
  for _, id in ipairs(g.ids) do
    local stop = string.find(lines, '\n', pos, true) or (#lines + 1)
    local seen = g.seen_prefix .. id
    -- A marker's expiry tells all: none (-2) is a new id; no expiry (-1) is a tombstone.
    local left = redis.call('PTTL', seen)
    if left == -2 then
      redis.call('SET', seen, member, 'PX', ttl_ms)
      local raw = string.sub(lines, pos, stop - 1)
      local m = cjson.decode(raw)
      redis.call('RPUSH', g.buf, raw)
      added, added_size = added + 1, added_size + m.z
      if newest > 0 and m.ts - newest > g.gap_ms then gap = true end
      if m.ts > newest then newest = m.ts end
    else
      -- Seeing an id again keeps it remembered; a deleted id (no expiry) stays deleted. The
      -- plugin re-sends every id thirty times: a write (and an AOF line) for each would be
      -- most of this script's cost, so the expiry is set back to `ttl` only once it is a step
      -- away from it: run down, or longer (the setting was lowered since).
      if left >= 0 and (left < ttl_ms - refresh_ms or left > ttl_ms) then
        redis.call('PEXPIRE', seen, ttl_ms)
      end
      dups = dups + 1
    end
    pos = stop + 1
  end
  if added > 0 then
    accepted = accepted + added
    for name, value in pairs(g.fields) do redis.call('HSETNX', meta, name, value) end
    redis.call('HSET', meta, 'last', now, 'newest', newest)
    local chars = redis.call('HINCRBY', meta, 'chars', added_size)
    redis.call('SADD', g.convs, member)
    -- The first spelling that stores something names the agent (its canonical name).
    redis.call('HSETNX', KEYS[3], plan.collection, g.agent)
    -- A quarantined conversation keeps its new messages but waits for a release.
    if not redis.call('ZSCORE', KEYS[4], member) then
      -- A chunk may close now: flush at once; else wait for the conversation to go quiet.
      local target = now + g.idle_ms
      if chars >= g.min_chars or gap then target = now end
      -- A conversation backing off (provider or Qdrant down) keeps its retry time.
      local retry_at = tonumber(redis.call('HGET', meta, 'retry_at') or '0')
      if target < retry_at then target = retry_at end
      local current = tonumber(redis.call('ZSCORE', due, member))
      if current == nil or current > now then redis.call('ZADD', due, target, member) end
    end
  end
end
return {accepted, dups}
