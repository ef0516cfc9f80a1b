-- Delete one context with its segment list, index and page entries. KEYS[1] record,
-- KEYS[2] pages, KEYS[3] segment list. ARGV: index prefix, context id. Returns 1 when a record
-- was deleted (a segment list left without its record, once it expired, counts as nothing).
local old = redis.call('HMGET', KEYS[1], '_idx', '_page')
if old[1] then redis.call('ZREM', ARGV[1] .. old[1], ARGV[2]) end
if old[2] then redis.call('ZREM', KEYS[2], old[2]) end
redis.call('DEL', KEYS[3])
return redis.call('DEL', KEYS[1])
