-- Delete one context with its index and page entries. KEYS[1] record, KEYS[2] pages.
-- ARGV: index prefix, context id. Returns 1 when a record was deleted.
local old = redis.call('HMGET', KEYS[1], '_idx', '_page')
if old[1] then redis.call('ZREM', ARGV[1] .. old[1], ARGV[2]) end
if old[2] then redis.call('ZREM', KEYS[2], old[2]) end
return redis.call('DEL', KEYS[1])
