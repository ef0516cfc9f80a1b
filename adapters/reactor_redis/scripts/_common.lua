-- Shared helpers, prepended to every script of reactor_redis.
-- Times are integer microseconds; "-1" means "no expiry".
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function us(n)
  return string.format('%.0f', n)
end
-- Set a key's native expiry (GC) to the absolute instant `at` (µs), or persist it (-1).
local function expire_at(key, at)
  if at < 0 then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, us(math.ceil(at / 1000)))
  end
end
-- Re-stamp every existing key of KEYS to ttl (µs, -1 = none) from now.
local function restamp_all(ttl)
  -- PEXPIRE and PERSIST leave a missing key missing: no EXISTS needed first.
  local ms = us(math.max(math.floor(ttl / 1000), 1))
  for _, k in ipairs(KEYS) do
    if ttl < 0 then
      redis.call('PERSIST', k)
    else
      redis.call('PEXPIRE', k, ms)
    end
  end
end
-- Keyset paging over a sorted set: the rank of the first member strictly after the position
-- (score, member), whether or not that member is still there (or has another score now). The
-- member is put at the position for the lookup and then restored (or removed again), inside
-- the calling script, so nothing visible changes. score is a ZSCORE/WITHSCORES string.
local function rank_after(key, score, member)
  local real = redis.call('ZSCORE', key, member)
  redis.call('ZADD', key, score, member)
  local r = redis.call('ZRANK', key, member)
  if real then
    redis.call('ZADD', key, real, member)
    if redis.call('ZRANK', key, member) <= r then return r + 1 end
    return r
  end
  redis.call('ZREM', key, member)
  return r
end
