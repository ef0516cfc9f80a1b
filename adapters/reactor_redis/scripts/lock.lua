-- Re-entrant owner-tokened TTL lock with fencing tokens (reactor.model.coordination.locks,
-- line by line; docs/coordination.md#fencing-tokens).
-- KEYS[1] hash {o: owner, n: count, x: expiry µs or -1, f: fencing token}; a released lock is a
-- tombstone {x: release µs, f: token} (no o, no n). The native expiry is x + retention, so a
-- lapsed lock or a tombstone keeps its token that long. ARGV[1] op, ARGV[2] owner, then
-- acquire/extend: ARGV[3] ttl_us (-1 = none), ARGV[4] retention_us; release: ARGV[3] retention_us.
-- Returns acquire: the token or 0; release/extend: 1/0; info: {owner, count, x, f} or nil.
local key, op = KEYS[1], ARGV[1]
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
local owner = ARGV[2]
if op == 'acquire' then
  local ttl, retention = tonumber(ARGV[3]), tonumber(ARGV[4])
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
    retain(now, tonumber(ARGV[3]))
  else
    redis.call('HSET', key, 'n', n - 1)
  end
  return 1
elseif op == 'extend' then
  local ttl = tonumber(ARGV[3])
  local x = -1
  if ttl >= 0 then x = now + ttl end
  redis.call('HSET', key, 'x', us(x))
  retain(x, tonumber(ARGV[4]))
  return 1
end
return redis.error_reply('unknown lock op ' .. op)
