-- Once-per-bucket marker, mark-if-absent (reactor.model.coordination.periods).
-- KEYS[1] hash {c: context id, a: marked µs, x: expiry µs or -1}. ARGV[1] op ('mark' |
-- 'marker'), ARGV[2] ttl_us, ARGV[3] context id ('' = none).
local key, op = KEYS[1], ARGV[1]
local now = now_us()
local s = redis.call('HMGET', key, 'c', 'a', 'x')
local live = s[2] ~= false and (tonumber(s[3]) < 0 or tonumber(s[3]) > now)
if op == 'marker' then
  if not live then return false end
  return {s[1] or '', s[2]}
end
if live then return 0 end
local ttl = tonumber(ARGV[2])
local x = -1
if ttl >= 0 then x = now + ttl end
redis.call('DEL', key)
redis.call('HSET', key, 'a', us(now), 'x', us(x))
if ARGV[3] ~= '' then redis.call('HSET', key, 'c', ARGV[3]) end
expire_at(key, x)
return 1
