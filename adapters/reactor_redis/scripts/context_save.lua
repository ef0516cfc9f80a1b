-- Save one context in one round trip: the record hash, its segment list, its scan index, its
-- page entry, TTL, under the record's fence (docs/workers.md, "Stale writers and fenced saves").
-- KEYS[1] record hash, KEYS[2] page set, KEYS[3] segment list (docs/protocol.md, "Incremental
-- checkpoints"). ARGV: ttl_us, index prefix, new index ('' = none), new page member ('' = none),
-- context id, fence token ('' = unfenced), segment count n, the n segments (oldest first), then
-- field/value pairs (the record's fields with 'base', '_count' and '_bytes').
-- The hash field '_fence' keeps the largest token of any fenced save. A fenced save whose
-- token is lower is refused: returns {0, stored token} and writes nothing. Otherwise the
-- record is written (keeping '_fence', raised to the save's token), the segment list replaced
-- by the record's segments (the previous base's are dropped) and 1 is returned.
local key, pages, segs = KEYS[1], KEYS[2], KEYS[3]
local ttl = tonumber(ARGV[1])
local prefix, new_idx, new_page, id, fence = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local nseg = tonumber(ARGV[7])
local old = redis.call('HMGET', key, '_idx', '_page', '_fence')
local stored = tonumber(old[3] or '0') or 0
local token = stored
if fence ~= '' then
  token = tonumber(fence)
  if token < stored then return {0, old[3]} end
end
local now = now_us()
if old[1] and old[1] ~= new_idx then redis.call('ZREM', prefix .. old[1], id) end
if old[2] and old[2] ~= new_page then redis.call('ZREM', pages, old[2]) end
redis.call('DEL', key, segs)
-- RPUSH in chunks: unpack() of a very long list would overflow Lua's C stack.
for i = 8, 7 + nseg, 1000 do
  redis.call('RPUSH', segs, unpack(ARGV, i, math.min(i + 999, 7 + nseg)))
end
local fields = {}
for i = 8 + nseg, #ARGV do fields[#fields + 1] = ARGV[i] end
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
return 1
