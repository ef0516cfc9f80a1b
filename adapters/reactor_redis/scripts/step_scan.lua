-- List live records of one shard by status index. KEYS[1] routing key of the shard.
-- ARGV: index prefix, record prefix, limit, statuses... Returns the records' JSON texts.
local prefix, rec, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_us()
local out = {}
for i = 4, #ARGV do
  if #out >= limit then break end
  local idx = prefix .. ARGV[i]
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', us(now))
  local members = redis.call('ZRANGE', idx, 0, -1)
  for _, m in ipairs(members) do
    if #out >= limit then break end
    local r = redis.call('HMGET', rec .. m, 's', 'j')
    if r[1] == ARGV[i] and r[2] then
      out[#out + 1] = r[2]
    else
      redis.call('ZREM', idx, m)
    end
  end
end
return out
