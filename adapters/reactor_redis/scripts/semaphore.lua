-- Counting semaphore as per-holder leases (reactor.model.coordination.semaphores).
-- KEYS[1] hash {l: limit}, KEYS[2] zset holder -> lease expiry µs.
-- ARGV[1] op, ARGV[2] holder, ARGV[3] lease_us, ARGV[4] limit.
local meta, holders, op = KEYS[1], KEYS[2], ARGV[1]
local now = now_us()
redis.call('ZREMRANGEBYSCORE', holders, '-inf', us(now))
local n = redis.call('ZCARD', holders)
local function gc()
  if redis.call('ZCARD', holders) == 0 then
    redis.call('DEL', meta, holders)
    return
  end
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  local at = tonumber(last[2])
  expire_at(holders, at)
  expire_at(meta, at)
end
if op == 'state' then
  if n == 0 then return false end
  local out = {redis.call('HGET', meta, 'l') or '0'}
  local all = redis.call('ZRANGE', holders, 0, -1, 'WITHSCORES')
  for _, v in ipairs(all) do out[#out + 1] = v end
  return out
elseif op == 'reset' then
  redis.call('DEL', meta, holders)
  return 1
end
local holder = ARGV[2]
local mine = redis.call('ZSCORE', holders, holder)
if op == 'acquire' then
  local limit = tonumber(ARGV[4])
  if n > 0 then limit = tonumber(redis.call('HGET', meta, 'l') or ARGV[4]) end
  if not mine and n >= limit then
    if n == 0 then redis.call('DEL', meta) end
    return 0
  end
  redis.call('ZADD', holders, us(now + tonumber(ARGV[3])), holder)
  redis.call('HSET', meta, 'l', limit)
  gc()
  return 1
elseif op == 'release' then
  if not mine then
    if n == 0 then redis.call('DEL', meta) end
    return 0
  end
  redis.call('ZREM', holders, holder)
  gc()
  return 1
elseif op == 'extend' then
  if not mine then return 0 end
  redis.call('ZADD', holders, us(now + tonumber(ARGV[3])), holder)
  gc()
  return 1
end
return redis.error_reply('unknown semaphore op ' .. op)
