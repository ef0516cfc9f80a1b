-- Save one context in one round trip: the record hash, its scan index, its page entry, TTL.
-- KEYS[1] record hash, KEYS[2] page set. ARGV: ttl_us, index prefix, new index ('' = none),
-- new page member ('' = none), context id, then field/value pairs.
local key, pages = KEYS[1], KEYS[2]
local ttl = tonumber(ARGV[1])
local prefix, new_idx, new_page, id = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now = now_us()
local old = redis.call('HMGET', key, '_idx', '_page')
if old[1] and old[1] ~= new_idx then redis.call('ZREM', prefix .. old[1], id) end
if old[2] and old[2] ~= new_page then redis.call('ZREM', pages, old[2]) end
redis.call('DEL', key)
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
if new_idx ~= '' then
  fields[#fields + 1] = '_idx'; fields[#fields + 1] = new_idx
end
if new_page ~= '' then
  fields[#fields + 1] = '_page'; fields[#fields + 1] = new_page
end
redis.call('HSET', key, unpack(fields))
local score = '+inf'
if ttl >= 0 then
  redis.call('PEXPIRE', key, us(math.max(math.floor(ttl / 1000), 1)))
  score = us(now + ttl)
end
if new_idx ~= '' then redis.call('ZADD', prefix .. new_idx, score, id) end
if new_page ~= '' then redis.call('ZADD', pages, 0, new_page) end
return 1
