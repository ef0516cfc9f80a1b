-- List live contexts of one shard from several index sets (indexed scan, never KEYS).
-- KEYS[1] any key of the shard (routing). ARGV: index prefix, record prefix, limit, names...
-- Returns a flat list of rows, each 7 values: id reactor status created updated parent child.
local prefix, rec, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_us()
local out, n = {}, 0
for i = 4, #ARGV do
  if n >= limit then break end
  local idx = prefix .. ARGV[i]
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', us(now))
  local ids = redis.call('ZRANGE', idx, 0, -1)
  for _, id in ipairs(ids) do
    if n >= limit then break end
    local r = redis.call('HMGET', rec .. id, 'id', 'reactor', 'status', 'created_at',
      'updated_at', 'parent', 'child', '_idx')
    if r[1] and r[8] == ARGV[i] then
      for j = 1, 7 do out[#out + 1] = r[j] or '' end
      n = n + 1
    else
      redis.call('ZREM', idx, id)
    end
  end
end
return out
