-- Multi-window fixed-window rate limit (reactor.model.coordination.rate_limits).
-- KEYS[1] hash; one counter per window id W in three fields: W -> count, W|b -> bucket,
-- W|x -> expiry µs (numbers only, so the hot path parses no strings). ARGV: triples
-- (window id, seconds_us, limit). Returns 1 (admitted, every window charged) or
-- {0, retry_after_us, index0} (the first full window; nothing charged). The read-only count
-- is scripts/rate_limit_count.lua.
--
-- Each window is judged in its effective bucket, as the model's ``effective_bucket``: the
-- caller's own, or a newer one already stored (a key's clock never goes back; a stored bucket
-- is never replaced by an older one). TIME is the one server clock, so here a stored bucket is
-- never newer than the caller's; the rule is kept line by line with the model all the same
-- (docs/coordination.md#clock-skew).
--
-- Hot path (every window's counter live and in its effective bucket): TIME, one HMGET, one
-- HINCRBY per window. Only when a counter is (re)created -- once per bucket, by an admission
-- or by a denial that reached a bucket not stored yet (an empty counter, as the model's
-- ``_record_buckets``) -- are lapsed counters dropped and the key's native expiry (garbage
-- collection only) moved to the latest live counter. A lapsed counter left in the hash
-- meanwhile reads as absent, as in the model.
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
-- pass 1: every window's effective bucket and count (count[wid] = false when the window needs
-- a new counter: none stored, lapsed, or of an older bucket), then the first full window.
local count, bucket = {}, {}
local deny = nil
for i = 1, n do
  local wid = fields[3 * i - 2]
  if count[wid] == nil then
    local b = floor(now / tonumber(ARGV[3 * i - 1]))
    local c, sb, x = tonumber(s[3 * i - 2]), tonumber(s[3 * i - 1]), tonumber(s[3 * i])
    if c and sb and x and x > now and sb >= b then
      count[wid], bucket[wid] = c, sb
    else
      count[wid], bucket[wid] = false, b
    end
  end
  if not deny and (count[wid] or 0) >= tonumber(ARGV[3 * i]) then deny = i end
end
-- pass 2: a denial charges nothing but stores an empty counter for every window whose
-- effective bucket is not stored yet; an admission charges every window (a window listed
-- twice is charged twice).
local charge = 1
if deny then charge = 0 end
local created = false
for i = 1, n do
  local wid = fields[3 * i - 2]
  if count[wid] == false then
    count[wid] = charge
    created = true
    redis.call('HSET', key, wid, charge, wid .. '|b', us(bucket[wid]),
      wid .. '|x', us(now + 2 * tonumber(ARGV[3 * i - 1])))
  elseif charge == 1 then
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
if deny then
  local sec = tonumber(ARGV[3 * deny - 1])
  local retry = (bucket[fields[3 * deny - 2]] + 1) * sec - now
  if retry < 100000 then retry = 100000 end
  return {0, us(retry), deny - 1}
end
return 1
