-- Multi-window fixed-window rate limit (reactor.model.coordination.rate_limits).
-- KEYS[1] hash window id -> "bucket|count|expiry µs". ARGV[1] op ('hit' | 'count'), then
-- triples (window id, seconds_us, limit). 'hit' returns {1} or {0, retry_after_us, index0};
-- 'count' returns the count of the first window.
local key, op = KEYS[1], ARGV[1]
local now = now_us()
local function parse(v)
  if not v then return nil end
  local b, c, x = string.match(v, '^([^|]*)|([^|]*)|([^|]*)$')
  return {b = tonumber(b), c = tonumber(c), x = tonumber(x)}
end
local function bucket(sec) return math.floor(now / sec) end
local function current(wid, sec)
  local c = parse(redis.call('HGET', key, wid))
  if not c or c.x <= now or c.b ~= bucket(sec) then return 0 end
  return c.c
end
if op == 'count' then
  return current(ARGV[2], tonumber(ARGV[3]))
end
local windows = {}
for i = 2, #ARGV, 3 do
  windows[#windows + 1] = {id = ARGV[i], sec = tonumber(ARGV[i + 1]), limit = tonumber(ARGV[i + 2])}
end
for i, w in ipairs(windows) do
  if current(w.id, w.sec) >= w.limit then
    local retry = (bucket(w.sec) + 1) * w.sec - now
    if retry < 100000 then retry = 100000 end
    return {0, us(retry), i - 1}
  end
end
if #windows == 0 then return {1} end
local counters = {}
local all = redis.call('HGETALL', key)
for i = 1, #all, 2 do
  local c = parse(all[i + 1])
  if c and c.x > now then counters[all[i]] = c else redis.call('HDEL', key, all[i]) end
end
for _, w in ipairs(windows) do
  local b = bucket(w.sec)
  local c = counters[w.id]
  if c and c.b == b then
    c.c = c.c + 1
  else
    counters[w.id] = {b = b, c = 1, x = now + 2 * w.sec}
  end
end
local maxx = 0
for wid, c in pairs(counters) do
  redis.call('HSET', key, wid, us(c.b) .. '|' .. us(c.c) .. '|' .. us(c.x))
  if c.x > maxx then maxx = c.x end
end
expire_at(key, maxx)
return {1}
