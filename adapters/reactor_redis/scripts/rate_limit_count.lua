-- The count of one rate-limit window's effective bucket (reactor.model.coordination.rate_limits
-- ``count``); the counter layout is described in rate_limit.lua. KEYS[1] hash; ARGV[1] window
-- id, ARGV[2] seconds_us. Returns the count (0 when absent, lapsed or of an older bucket than
-- the caller's; a stored newer bucket is the effective one, docs/coordination.md#clock-skew).
local key, wid = KEYS[1], ARGV[1]
local now = now_us()
local s = redis.call('HMGET', key, wid, wid .. '|b', wid .. '|x')
local c, b, x = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
if not c or not b or not x or x <= now or b < math.floor(now / tonumber(ARGV[2])) then
  return 0
end
return c
