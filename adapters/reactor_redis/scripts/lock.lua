-- Re-entrant owner-tokened TTL lock (reactor.model.coordination.locks, line by line).
-- KEYS[1] hash {o: owner, n: count, x: expiry µs or -1}. ARGV[1] op, ARGV[2] owner,
-- ARGV[3] ttl_us (-1 = none). Returns 1/0, or for 'info' {owner, count, x} / nil.
local key, op = KEYS[1], ARGV[1]
local now = now_us()
local s = redis.call('HMGET', key, 'o', 'n', 'x')
local live = s[1] ~= false and (tonumber(s[3]) < 0 or tonumber(s[3]) > now)
if op == 'info' then
  if not live then return false end
  return {s[1], s[2], s[3]}
end
local owner = ARGV[2]
if op == 'acquire' then
  local ttl = tonumber(ARGV[3])
  local x = -1
  if ttl >= 0 then x = now + ttl end
  local n = 1
  if live then
    if s[1] ~= owner then return 0 end
    n = tonumber(s[2]) + 1
  end
  redis.call('HSET', key, 'o', owner, 'n', n, 'x', us(x))
  expire_at(key, x)
  return 1
end
if not live or s[1] ~= owner then return 0 end
if op == 'release' then
  local n = tonumber(s[2])
  if n <= 1 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'n', n - 1)
  end
  return 1
elseif op == 'extend' then
  local ttl = tonumber(ARGV[3])
  local x = -1
  if ttl >= 0 then x = now + ttl end
  redis.call('HSET', key, 'x', us(x))
  expire_at(key, x)
  return 1
end
return redis.error_reply('unknown lock op ' .. op)
