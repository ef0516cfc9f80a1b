-- Write one Step Result Record with its status index and TTL.
-- KEYS[1] record hash. ARGV: ttl_us, index prefix, member, status, json.
local key, ttl = KEYS[1], tonumber(ARGV[1])
local prefix, member, status = ARGV[2], ARGV[3], ARGV[4]
local now = now_us()
local old = redis.call('HGET', key, 's')
if old and old ~= status then redis.call('ZREM', prefix .. old, member) end
redis.call('HSET', key, 's', status, 'j', ARGV[5])
local score = '+inf'
if ttl >= 0 then
  redis.call('PEXPIRE', key, us(math.max(math.floor(ttl / 1000), 1)))
  score = us(now + ttl)
else
  redis.call('PERSIST', key)
end
redis.call('ZADD', prefix .. status, score, member)
return 1
