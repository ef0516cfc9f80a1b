-- Append one incremental checkpoint in one round trip (docs/protocol.md, "Incremental
-- checkpoints"): check the record's fence (as context_save.lua does: docs/workers.md, "Stale
-- writers and fenced saves"), its base and segment count, the size limit; then push the segment,
-- update the head fields, move the scan index entry and re-stamp the TTL of the hash and list.
-- KEYS[1] record hash, KEYS[2] segment list. ARGV: ttl_us, index prefix, context id, fence
-- token ('' = unfenced), base, segments expected before this one (position - 1), segment,
-- segment UTF-8 bytes, byte limit ('' = unbounded), status, updated_at, the index of the
-- new status for a top-level run, the one for a dispatched child ('' = none); the number n of
-- claim keys KEYS[3..2+n] to read once appended (the run's cancel request: docs/protocol.md,
-- "Optional fast paths"; '' or absent = 0); then, to release the run's liveness lock
-- KEYS[3+n] once the segment is written, the lock owner and retention_us, and a signal
-- channel ('' = none) to publish the new status on once released (a run's completion).
-- Returns 1 when appended (with n > 0: {1, the claim values, false where absent}); 0 when
-- nothing was written because the record is absent, has another base or segment count (or
-- lost segments); {'fence', stored token} when a fenced append is refused; {'size', stored
-- bytes with the segment} when over the limit.
local key, segs = KEYS[1], KEYS[2]
local ttl = tonumber(ARGV[1])
local prefix, id, fence, base = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local count, seg, size, limit = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8]), ARGV[9]
local status, updated, root_idx, child_idx = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local head = redis.call('HMGET', key, 'id', 'base', '_count', '_bytes', '_fence', '_idx',
  'parent', 'child')
if not head[1] then return 0 end
local stored = tonumber(head[5] or '0') or 0
if fence ~= '' and tonumber(fence) < stored then return {'fence', head[5]} end
if head[2] ~= base or (tonumber(head[3] or '0') or 0) ~= count then return 0 end
local held = redis.call('LLEN', segs)
if held < count then return 0 end -- segments lost (evicted): the writer saves whole
local total = (tonumber(head[4] or '0') or 0) + size
if limit ~= '' and total > tonumber(limit) then return {'size', us(total)} end
if held > count then -- never written past the head; trimmed to what the head counts
  if count == 0 then
    redis.call('DEL', segs)
  else
    redis.call('LTRIM', segs, 0, count - 1)
  end
end
redis.call('RPUSH', segs, seg)
local idx = ''
if not head[7] then idx = root_idx elseif head[8] == '1' then idx = child_idx end
local fields = {'status', status, 'updated_at', updated, '_count', us(count + 1),
  '_bytes', us(total)}
if fence ~= '' then
  fields[#fields + 1] = '_fence'; fields[#fields + 1] = fence
end
if idx ~= '' then
  fields[#fields + 1] = '_idx'; fields[#fields + 1] = idx
elseif head[6] then
  redis.call('HDEL', key, '_idx')
end
redis.call('HSET', key, unpack(fields))
if head[6] and head[6] ~= idx then redis.call('ZREM', prefix .. head[6], id) end
local score = '+inf'
if ttl >= 0 then
  local ms = us(math.max(math.floor(ttl / 1000), 1))
  redis.call('PEXPIRE', key, ms)
  redis.call('PEXPIRE', segs, ms)
  score = us(now_us() + ttl)
else
  redis.call('PERSIST', key)
  redis.call('PERSIST', segs)
end
if idx ~= '' then redis.call('ZADD', prefix .. idx, score, id) end
local n = tonumber(ARGV[14] or '') or 0
if ARGV[15] then
  lock_call(KEYS[3 + n], 'release', ARGV[15], ARGV[16])
  if ARGV[17] ~= '' then redis.call('PUBLISH', ARGV[17], status) end
end
if n == 0 then return 1 end
local claims = {}
for i = 3, 2 + n do claims[#claims + 1] = redis.call('GET', KEYS[i]) end
return {1, claims}
