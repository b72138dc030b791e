-- save.lua: buffer the messages of one /save not seen before, and apply the edits among the
-- re-sent ones, atomically for the whole request.
--
-- KEYS[1]  the due set (zset: conversation -> when its flush is due, ms)
-- KEYS[2]  the agent's block key (string: the reason its saves are refused), if held
-- KEYS[3]  the agent names hash (collection -> canonical name)
-- KEYS[4]  the quarantine set (zset of conversations set aside)
-- KEYS[5]  the agent's edits hash (edit field -> stored JSON): edits of written chunks
-- KEYS[6]  the set of collections with edits waiting
-- KEYS[7]  the agent's emptied hash (edit field -> the stored JSON an emptied message had)
-- ARGV[1]  the plan, JSON:
--   now         ms since the epoch
--   ttl         seconds a seen id is remembered (dedupe), counted from when it was last seen
--   refresh_ms  the step of a mark's expiry: a re-sent id gets its full `ttl` back once
--               `now + ttl` is in another step than when its mark was written (so at most once
--               a step, and when the TTL was changed since); optional, 0 (the default) renews
--               on every re-send
--   collection  the agent's collection (its identity)
--   meta_prefix, buf_prefix   a conversation's hash and buffer are these .. its key
--   edit_only   true: store no new id (PATCH); each message's outcome is returned
--   stored      true: an id with no mark is known to be in a rebuildable written chunk
--   groups      one table per conversation, in order:
--     meta, buf, convs  the conversation's hash, buffer list, and its agent's conversation set
--     member            the conversation key (the due set's member)
--     agent             the agent's name as this request spells it
--     fields            {name = value}: the hash fields to set once (agent, source, cid, channel,
--                       guild, noidle); the empty ones are left out
--     min_chars, gap_ms, idle_ms   when the conversation becomes due
--     seen_prefix, ids  a message's dedupe key is seen_prefix .. its id (escaped as a key part)
--     fps               each id's text fingerprint (shared/format/fingerprint.py)
--     short             the positions (1-based) of the ids whose text is too short to store
--     edit_prefix       a message's field in the edits and emptied hashes is this .. its id
-- ARGV[2]  the messages' stored JSON, one per line, in the order of the groups' ids (stored JSON
--          has no raw newline: json escapes it). Passed byte for byte and never re-encoded (cjson
--          would reorder it and round `ts`); only a new or changed message's line is decoded, so
--          a re-sent known one costs one read (GET), and a refresh now and then.
--
-- A dedupe mark is "=<state> <fingerprint> <step> <conversation>", its step that of its expiry
-- when it was written ((now + ttl) // refresh_ms; the expiry in ms itself in marks of the
-- version before, which a re-send writes again in this form), the state one of
--   b  the message is buffered or in a chunk memory-pool can rebuild
--   l  first seen before marks held fingerprints, and no longer buffered: its chunk cannot be
--      rebuilt, an edit of it is counted `stale`
--   o  emptied: an edit to a too-short text took it out of its chunk
-- A mark of older code holds only the conversation; a deleted id's is "deleted", no expiry.
--
-- Returns {accepted, duplicates, edited, stale, skipped, outcome...} (an outcome per message in
-- edit_only mode: new, same, deleted, edited, stale, emptied), or {-1, reason} when the agent is
-- held (nothing changes).
local plan = cjson.decode(ARGV[1])
local reason = redis.call('GET', KEYS[2])
if reason then return {-1, reason} end
local now, due, lines = plan.now, KEYS[1], ARGV[2]
local edits, edits_due, emptied = KEYS[5], KEYS[6], KEYS[7]
local ttl_ms, refresh_ms = plan.ttl * 1000, plan.refresh_ms or 0
local accepted, dups, edited, stale, skipped = 0, 0, 0, 0, 0
local at = {now = now, due = due, quarantine = KEYS[4], meta_prefix = plan.meta_prefix,
  buf_prefix = plan.buf_prefix}
local outcomes = {}

-- A mark's third field is its expiry's step: (now + ttl) / refresh_ms, rounded down (each ms
-- with refresh_ms 0). A re-send in the same step finds its mark equal to the one it would write
-- and writes nothing; in a later step (or with the TTL since lowered) the mark is set again,
-- its expiry back to `ttl`. So an id stays remembered for `ttl` after it was last seen, to a
-- step, for one write per id and step.
local step_s = string.format('%d', refresh_ms > 0 and math.floor((now + ttl_ms) / refresh_ms)
  or now + ttl_ms)

local function mark(state, fp, member)
  return '=' .. state .. ' ' .. fp .. ' ' .. step_s .. ' ' .. member
end

-- state, fingerprint, expiry step, conversation; nil for a mark of older code
local function parsed(value)
  local state, fp, step, member = string.match(value, '^=(%a) (%x*) (%d+) (.+)$')
  if state then return state, fp, step, member end
  return nil, nil, nil, value
end

-- The buffered message at `idx` takes the new text (its speaker, time and ids stay), or, too
-- short now, leaves the buffer (kept in the emptied hash to come back). A flush in flight
-- takes its points back (generation); the open chunk's stored point is rewritten, or retired
-- when its first message left (its point id came from it). Returns the mark's new state, or
-- nil when the buffered record cannot be edited in place.
local function edit_buffered(member, field, idx, raw, old, line, m, short, idle_ms, min_chars)
  local meta, buf = plan.meta_prefix .. member, plan.buf_prefix .. member
  local written = tonumber(redis.call('HGET', meta, 'written') or '0')
  local old_z, state = tonumber(old.z) or 0, 'b'
  local edited_raw, z
  if not short then
    edited_raw, z = with_text(raw, old, line, m)
    if not edited_raw then return nil end
  end
  if idx <= written then
    -- The open chunk's stored point no longer matches the buffer: the flush writes it again.
    -- Its id came from the first buffered message, which `head` names (commit.lua; set here
    -- too for a chunk committed before it did), so the point is still retired if that
    -- message leaves before then (forget.lua too).
    redis.call('HSET', meta, 'head', first_id(buf), 'written', 0)
  end
  if short then
    redis.call('LSET', buf, idx - 1, '\0emptied')
    redis.call('LREM', buf, 1, '\0emptied')
    redis.call('HINCRBY', meta, 'chars', -old_z)
    redis.call('HSET', emptied, field, raw)
    if idx == 1 and redis.call('HGET', meta, 'head') == old.i then
      redis.call('HSET', meta, 'retire', old.i)
    end
    state = 'o'
  else
    redis.call('LSET', buf, idx - 1, edited_raw)
    redis.call('HINCRBY', meta, 'chars', z - old_z)
  end
  redis.call('HINCRBY', meta, 'gen', 1)
  redis.call('HSET', meta, 'last', now)
  local size = tonumber(redis.call('HGET', meta, 'chars') or '0')
  local retire = redis.call('HEXISTS', meta, 'retire') == 1
  schedule(at, meta, member, idle_ms, retire or size >= min_chars)
  return state
end

-- A re-sent id whose text differs (or whose mark has no fingerprint): returns the mark's new
-- state and what happened (edited, same, stale, emptied, skipped).
local function changed(state, member, field, line, short, g)
  local m = cjson.decode(line)
  if state ~= 'o' then
    local idx, raw, old = find(plan.buf_prefix .. member, m.i, line)
    if idx then
      if state == nil and old.t == m.t then return 'b', 'same' end
      if state == nil and short then return 'b', 'skipped' end
      local new_state = edit_buffered(member, field, idx, raw, old, line, m, short, g.idle_ms,
        g.min_chars)
      if new_state then return new_state, 'edited' end
      return 'l', 'stale'
    end
  end
  -- Not buffered: its chunk is written.
  if state == nil then return 'l', 'same' end -- first seen by older code: nothing to compare
  if state == 'l' then return 'l', 'stale' end
  if state == 'o' and short then return 'o', 'skipped' end
  -- Back at once only when its emptying edit is done: while that waits, its chunk may still
  -- hold the message, and the worker (which kept its record first) brings it back.
  if state == 'o' and redis.call('HEXISTS', edits, field) == 0
      and bring_back(at, emptied, field, member, line, m, g.idle_ms, g.min_chars) then
    return 'b', 'edited'
  end
  -- A worker rewrites the chunk (workers/edits.py); an emptied message comes back through it.
  redis.call('HSET', edits, field, line)
  redis.call('SADD', edits_due, plan.collection)
  if short then return 'o', 'edited' end
  return 'b', 'edited'
end

local function count(outcome, short)
  if outcome == 'edited' then edited = edited + 1
  elseif outcome == 'stale' then stale = stale + 1
  elseif outcome == 'skipped' or short then skipped = skipped + 1
  else dups = dups + 1 end
end

local pos = 1
for _, g in ipairs(plan.groups) do
  local meta, member = g.meta, g.member
  local newest = tonumber(redis.call('HGET', meta, 'newest') or '0')
  local added, added_size, gap = 0, 0, false
  local short_at = {}
  local tail = ' ' .. step_s .. ' ' .. member
  for _, k in ipairs(g.short) do short_at[k] = true end
  for k, id in ipairs(g.ids) do
    local stop = string.find(lines, '\n', pos, true) or (#lines + 1)
    local seen, fp, short = g.seen_prefix .. id, g.fps[k], short_at[k] == true
    local value = redis.call('GET', seen)
    local outcome
    if not value and plan.stored then value = mark('b', '', member) end
    if not value then
      if short or plan.edit_only then
        outcome = 'new'
        skipped = skipped + 1
      else
        outcome = 'accepted'
        redis.call('SET', seen, mark('b', fp, member), 'PX', ttl_ms)
        local raw = string.sub(lines, pos, stop - 1)
        local m = cjson.decode(raw)
        redis.call('RPUSH', g.buf, raw)
        added, added_size = added + 1, added_size + m.z
        if newest > 0 and m.ts - newest > g.gap_ms then gap = true end
        if m.ts > newest then newest = m.ts end
      end
    elseif value == 'deleted' then
      -- a deleted id stays deleted, whatever text comes
      outcome = 'deleted'
      count(outcome, short)
    elseif #fp > 0 and value == '=b ' .. fp .. tail then
      -- The common case (28 of the plugin's 30 messages): seen with this text, in this step
      -- of its expiry, in this conversation. One compare (Lua interns its strings), no write.
      outcome = 'same'
      if short then skipped = skipped + 1 else dups = dups + 1 end -- count('same', short)
    else
      local state, mark_fp, step, where = parsed(value)
      if state and #fp > 0 and mark_fp == fp then
        -- Seen with this text, in an earlier step (or another state): a write a step and id,
        -- not per re-send (the plugin re-sends every id thirty times).
        if step ~= step_s then redis.call('SET', seen, mark(state, fp, where), 'PX', ttl_ms) end
        outcome = 'same'
        count(outcome, short)
      else
        local new_state
        new_state, outcome = changed(state, where, g.edit_prefix .. id,
          string.sub(lines, pos, stop - 1), short, g)
        redis.call('SET', seen, mark(new_state, fp, where), 'PX', ttl_ms)
        count(outcome, short)
        if outcome == 'edited' and new_state == 'o' then outcome = 'emptied' end
        -- too short and skipped: an emptied message stays out of its chunk; for any other
        -- (a mark of older code, whose buffered message keeps its text) nothing changed
        if outcome == 'skipped' then outcome = new_state == 'o' and 'emptied' or 'same' end
      end
    end
    if plan.edit_only then outcomes[#outcomes + 1] = outcome end
    pos = stop + 1
  end
  if added > 0 then
    accepted = accepted + added
    for name, value in pairs(g.fields) do redis.call('HSETNX', meta, name, value) end
    redis.call('HSET', meta, 'last', now, 'newest', newest)
    local size = redis.call('HINCRBY', meta, 'chars', added_size)
    redis.call('SADD', g.convs, member)
    -- The first spelling that stores something names the agent (its canonical name).
    redis.call('HSETNX', KEYS[3], plan.collection, g.agent)
    schedule(at, meta, member, g.idle_ms, size >= g.min_chars or gap)
  end
end
local result = {accepted, dups, edited, stale, skipped}
for _, outcome in ipairs(outcomes) do result[#result + 1] = outcome end
return result
