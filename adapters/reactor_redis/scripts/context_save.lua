-- Save one context in one round trip: the record hash, its segment list, its scan index, its
-- page entry, TTL, under the record's fence (docs/workers.md, "Stale writers and fenced saves");
-- optionally taking or releasing the run's liveness lock in the same step (docs/protocol.md,
-- "Optional fast paths").
-- KEYS[1] record hash, KEYS[2] page set, KEYS[3] segment list (docs/protocol.md, "Incremental
-- checkpoints"), KEYS[4] the lock hash when ARGV[1] is not ''.
-- ARGV: lock op ('' = none, 'take': acquire first and fence the save with the new token,
-- 'drop': release after writing), lock owner, lock ttl_us, lock retention_us, a signal
-- channel ('' = none) on which 'drop' publishes the record's status once released; then ttl_us,
-- index prefix, new index ('' = none), new page member ('' = none), context id, fence token
-- ('' = unfenced), segment count n, the n segments (oldest first), then field/value pairs (the
-- record's fields with 'base', '_count' and '_bytes').
-- The hash field '_fence' keeps the largest token of any fenced save. A fenced save whose
-- token is lower is refused: returns {0, stored token, the save's token} and writes nothing
-- (nor releases; a 'take' gives back the lock it took).
-- 'take' on a lock another owner holds returns {'held'} and writes nothing. Otherwise the
-- record is written (keeping '_fence', raised to the save's token), the segment list replaced
-- by the record's segments (the previous base's are dropped) and 1 is returned ('take': the
-- new fencing token).
local key, pages, segs = KEYS[1], KEYS[2], KEYS[3]
local lock_op, lock_owner, lock_ttl, lock_keep = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local announce = ARGV[5]
local ttl = tonumber(ARGV[6])
local prefix, new_idx, new_page, id, fence = ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local nseg = tonumber(ARGV[12])
if lock_op == 'take' then
  local granted = lock_call(KEYS[4], 'acquire', lock_owner, lock_ttl, lock_keep)
  if granted == 0 then return {'held'} end
  fence = us(granted)
end
local old = redis.call('HMGET', key, '_idx', '_page', '_fence')
local stored = tonumber(old[3] or '0') or 0
local token = stored
if fence ~= '' then
  token = tonumber(fence)
  if token < stored then
    -- refused: a lock this call took is given back (a 'take' never keeps what it cannot use)
    if lock_op == 'take' then lock_call(KEYS[4], 'release', lock_owner, lock_keep) end
    return {0, old[3], fence}
  end
end
local now = now_us()
if old[1] and old[1] ~= new_idx then redis.call('ZREM', prefix .. old[1], id) end
if old[2] and old[2] ~= new_page then redis.call('ZREM', pages, old[2]) end
redis.call('DEL', key, segs)
-- RPUSH in chunks: unpack() of a very long list would overflow Lua's C stack.
for i = 13, 12 + nseg, 1000 do
  redis.call('RPUSH', segs, unpack(ARGV, i, math.min(i + 999, 12 + nseg)))
end
local fields = {}
for i = 13 + nseg, #ARGV do fields[#fields + 1] = ARGV[i] end
if new_idx ~= '' then
  fields[#fields + 1] = '_idx'; fields[#fields + 1] = new_idx
end
if new_page ~= '' then
  fields[#fields + 1] = '_page'; fields[#fields + 1] = new_page
end
if token > 0 then
  fields[#fields + 1] = '_fence'
  if fence ~= '' then fields[#fields + 1] = fence else fields[#fields + 1] = old[3] end
end
redis.call('HSET', key, unpack(fields))
local score = '+inf'
if ttl >= 0 then
  local ms = us(math.max(math.floor(ttl / 1000), 1))
  redis.call('PEXPIRE', key, ms)
  if nseg > 0 then redis.call('PEXPIRE', segs, ms) end
  score = us(now + ttl)
end
if new_idx ~= '' then redis.call('ZADD', prefix .. new_idx, score, id) end
if new_page ~= '' then redis.call('ZADD', pages, 0, new_page) end
if lock_op == 'take' then return tonumber(fence) end
if lock_op == 'drop' then
  lock_call(KEYS[4], 'release', lock_owner, lock_keep)
  if announce ~= '' then
    local status
    for i = 1, #fields, 2 do
      if fields[i] == 'status' then status = fields[i + 1] end
    end
    redis.call('PUBLISH', announce, status)
  end
end
return 1
