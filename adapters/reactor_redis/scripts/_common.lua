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
-- Re-stamp every existing key of KEYS (the first n when given) to ttl (µs, -1 = none) from now.
local function restamp_all(ttl, n)
  -- PEXPIRE and PERSIST leave a missing key missing: no EXISTS needed first.
  local ms = us(math.max(math.floor(ttl / 1000), 1))
  for i = 1, n or #KEYS do
    if ttl < 0 then
      redis.call('PERSIST', KEYS[i])
    else
      redis.call('PEXPIRE', KEYS[i], ms)
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
-- The lock operations of lock.lua (docs/coordination.md#fencing-tokens), callable from the
-- scripts that take or release a run's liveness lock together with its record
-- (docs/protocol.md, "Optional fast paths"). key: the lock hash; op: 'acquire', 'release',
-- 'extend' or 'info'; then acquire/extend: a3 ttl_us (-1 = none), a4 retention_us; release:
-- a3 retention_us. Returns as lock.lua does.
local function lock_call(key, op, owner, a3, a4)
  local now = now_us()
  local s = redis.call('HMGET', key, 'o', 'n', 'x', 'f')
  local live = s[1] ~= false and (tonumber(s[3]) < 0 or tonumber(s[3]) > now)
  if op == 'info' then
    if not live then return false end
    return {s[1], s[2], s[3], s[4] or '0'}
  end
  -- The record's garbage collection: its logical expiry x plus the retention (never when x < 0).
  local function retain(x, retention)
    if x < 0 then expire_at(key, -1) else expire_at(key, x + retention) end
  end
  if op == 'acquire' then
    local ttl, retention = tonumber(a3), tonumber(a4)
    local x = -1
    if ttl >= 0 then x = now + ttl end
    if live then
      if s[1] ~= owner then return 0 end
      -- a holder written before tokens existed (no f) gets one on its next re-entry
      local held = tonumber(s[4] or '0')
      if held <= 0 then held = now end
      redis.call('HSET', key, 'n', tonumber(s[2]) + 1, 'x', us(x), 'f', us(held))
      retain(x, retention)
      return held
    end
    local token = math.max(tonumber(s[4] or '0') + 1, now)
    redis.call('HSET', key, 'o', owner, 'n', 1, 'x', us(x), 'f', us(token))
    retain(x, retention)
    return token
  end
  if not live or s[1] ~= owner then return 0 end
  if op == 'release' then
    local n = tonumber(s[2])
    if n <= 1 then
      redis.call('HDEL', key, 'o', 'n')
      redis.call('HSET', key, 'x', us(now))
      retain(now, tonumber(a3))
    else
      redis.call('HSET', key, 'n', n - 1)
    end
    return 1
  elseif op == 'extend' then
    local ttl = tonumber(a3)
    local x = -1
    if ttl >= 0 then x = now + ttl end
    redis.call('HSET', key, 'x', us(x))
    retain(x, tonumber(a4))
    return 1
  end
  return redis.error_reply('unknown lock op ' .. op)
end
