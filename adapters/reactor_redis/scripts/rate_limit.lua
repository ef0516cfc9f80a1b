-- Multi-window fixed-window rate limit (reactor.model.coordination.rate_limits).
-- KEYS[1] hash; one counter per window id W in three fields: W -> count, W|b -> bucket,
-- W|x -> expiry µs (numbers only, so the hot path parses no strings). ARGV: triples
-- (window id, seconds_us, limit). Returns 1 (admitted, every window charged) or
-- {0, retry_after_us, index0} (the first full window; nothing charged). The read-only count
-- is scripts/rate_limit_count.lua.
--
-- Hot path (every window's counter live and in its current bucket): TIME, one HMGET, one
-- HINCRBY per window. Only when a counter is (re)created -- once per bucket -- are lapsed
-- counters dropped and the key's native expiry (garbage collection only) moved to the latest
-- live counter. A lapsed counter left in the hash meanwhile reads as absent, as in the model.
local key = KEYS[1]
local now = now_us()
local floor = math.floor
local n = #ARGV / 3
if n == 0 then return 1 end
local fields = {}
for i = 1, n do
  local wid = ARGV[3 * i - 2]
  fields[3 * i - 2], fields[3 * i - 1], fields[3 * i] = wid, wid .. '|b', wid .. '|x'
end
local s = redis.call('HMGET', key, unpack(fields))
-- pass 1: deny on the first full window, nothing charged. live[wid] = false when the window
-- needs a new counter; otherwise its current count.
local live, buckets = {}, {}
for i = 1, n do
  local wid, sec = fields[3 * i - 2], tonumber(ARGV[3 * i - 1])
  local b = floor(now / sec)
  buckets[i] = b
  local c = live[wid]
  if c == nil then
    c = tonumber(s[3 * i - 2]) or false
    local x = tonumber(s[3 * i])
    if not c or not x or x <= now or tonumber(s[3 * i - 1]) ~= b then c = false end
    live[wid] = c
  end
  if (c or 0) >= tonumber(ARGV[3 * i]) then
    local retry = (b + 1) * sec - now
    if retry < 100000 then retry = 100000 end
    return {0, us(retry), i - 1}
  end
end
-- pass 2: charge every window (a window listed twice is charged twice)
local created = false
for i = 1, n do
  local wid = fields[3 * i - 2]
  if live[wid] == false then
    live[wid] = 1
    created = true
    redis.call('HSET', key, wid, 1, wid .. '|b', us(buckets[i]),
      wid .. '|x', us(now + 2 * tonumber(ARGV[3 * i - 1])))
  else
    redis.call('HINCRBY', key, wid, 1)
  end
end
if created then
  local latest, all, stale = 0, redis.call('HGETALL', key), {}
  local values = {}
  for i = 1, #all, 2 do values[all[i]] = all[i + 1] end
  for f, v in pairs(values) do
    if string.sub(f, -2) == '|x' then
      local x = tonumber(v)
      if x and x > now then
        if x > latest then latest = x end
      else
        local wid = string.sub(f, 1, -3)
        stale[#stale + 1] = wid
        stale[#stale + 1] = wid .. '|b'
        stale[#stale + 1] = f
      end
    end
  end
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  expire_at(key, latest)
end
return 1
