-- Ordered lock (reactor.model.coordination.ordered_locks), transliterated function by function.
-- KEYS[1] hash of the five logical fields, each with its own expiry:
--   n/nx next nonce, c/cx cursor, f/fx first failed, e/ex epoch, tx the timers' expiry;
-- KEYS[2] hash nonce -> assigned/heartbeat µs (the timers). Expiries are µs, -1 = never.
-- ARGV[1] op, then op arguments (times and durations in µs), and always last the fence
-- retention in µs: KEYS[1]'s native expiry is its longest-lived field's plus the retention, so
-- a lapsed or reset epoch (kept as a field whose ex has passed) still seeds the next batch's
-- epoch max(e + 1, now) (docs/coordination.md#fencing-tokens).
local K, T, op = KEYS[1], KEYS[2], ARGV[1]
local R = tonumber(ARGV[#ARGV])
local now = now_us()

local function alive(x) return x < 0 or x > now end
local function field(name)
  local v = redis.call('HGET', K, name)
  if not v then return nil end
  local x = tonumber(redis.call('HGET', K, name .. 'x') or '-1')
  if not alive(x) then return nil end
  return {v = tonumber(v), x = x}
end
local function load()
  local view = {n = field('n'), c = field('c'), f = field('f'), e = field('e')}
  local tx = redis.call('HGET', K, 'tx')
  if tx and alive(tonumber(tx)) then
    local all = redis.call('HGETALL', T)
    if #all > 0 then
      local m = {}
      for i = 1, #all, 2 do m[tonumber(all[i])] = tonumber(all[i + 1]) end
      view.t = {v = m, x = tonumber(tx)}
    end
  end
  if not (view.n or view.c or view.f or view.e or view.t) then return nil end
  return view
end
local function val(item) if item then return item.v end return 0 end
-- The stored epoch, live or lapsed: the fence of the next batch (read before any write).
local function stored_epoch()
  local v = redis.call('HGET', K, 'e')
  if not v then return nil end
  return {v = tonumber(v), x = tonumber(redis.call('HGET', K, 'ex') or '-1')}
end
local fence = stored_epoch()
local function copy(t) local o = {} for k, v in pairs(t) do o[k] = v end return o end
local function timers_of(view)
  if view.t then return copy(view.t.v) end
  return {}
end
local function nonempty(m) return next(m) ~= nil end
local function with_timers(view, timers)
  if not nonempty(timers) then return nil end
  local x = -1
  if view.t then x = view.t.x elseif view.n then x = view.n.x end
  return {v = timers, x = x}
end
local function set_cursor(view, value)
  if view.c then return {v = value, x = view.c.x} end
  if view.n then return {v = value, x = view.n.x} end
  return {v = value, x = -1}
end
local function gc_if_drained(st)
  local nxt = val(st.n)
  if nxt > 0 and val(st.c) >= nxt then return {e = st.e} end
  return st
end
local function store(st)
  redis.call('DEL', K, T)
  if st == nil then st = {} end
  if st.t and not nonempty(st.t.v) then st.t = nil end
  if st.e == nil then st.e = fence end  -- keep a lapsed epoch: the next batch's fence
  if not (st.n or st.c or st.f or st.e or st.t) then return end
  local latest, never = 0, false
  local function note(x) if x < 0 then never = true elseif x > latest then latest = x end end
  for _, name in ipairs({'n', 'c', 'f', 'e'}) do
    local item = st[name]
    if item then
      redis.call('HSET', K, name, us(item.v), name .. 'x', us(item.x))
      note(item.x)
    end
  end
  if st.t then
    redis.call('HSET', K, 'tx', us(st.t.x))
    note(st.t.x)
    for nonce, at in pairs(st.t.v) do redis.call('HSET', T, us(nonce), us(at)) end
  end
  local at = latest
  if never then at = -1 end
  if at < 0 then expire_at(K, -1) else expire_at(K, at + R) end
  if st.t then expire_at(T, at) end
end
local function stale(view, epoch)
  local current = 0
  if view then current = val(view.e) end
  return epoch > 0 and epoch ~= current
end
local function drained(view) return view == nil or (view.n == nil and view.c == nil) end
local function deadline(ttl) if ttl < 0 then return -1 end return now + ttl end

local view = load()

if op == 'assign' then                         -- ARGV[2] ttl
  local x = deadline(tonumber(ARGV[2]))
  local v = view or {}
  local nonce = val(v.n) + 1
  local epoch
  if nonce == 1 or v.e == nil then epoch = math.max(val(fence) + 1, now) else epoch = v.e.v end
  local timers = timers_of(v)
  timers[nonce] = now
  store({n = {v = nonce, x = x}, c = {v = val(v.c), x = x}, t = {v = timers, x = x},
         f = v.f, e = {v = epoch, x = x}})
  return {nonce, epoch}
end

if op == 'can_proceed' then                    -- ARGV[2] nonce, ARGV[3] epoch, ARGV[4] pp
  local my, epoch, pp = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local last, ff = 0, 0
  if view then last = val(view.c); ff = val(view.f) end
  if stale(view, epoch) then return {'stale', '0', last, ff} end
  if drained(view) then return {'drained_go', '0', last, ff} end
  local timers = timers_of(view)
  local changed = false
  if my > last and timers[my] then timers[my] = now; changed = true end
  local advanced = false
  if not (my <= last or my == last + 1) then
    while last + 1 < my do
      local b = last + 1
      local at = timers[b] or 0
      if at > 0 and now - at <= pp then break end
      last = b
      timers[b] = nil
      advanced = true
    end
  end
  if advanced or changed then
    local new = copy(view)
    new.t = with_timers(view, timers)
    if advanced then new.c = set_cursor(view, last) end
    store(new)
  end
  if my <= last + 1 then
    local gate = 'go'
    if advanced then gate = 'poison_advance' end
    return {gate, '0', last, ff}
  end
  local blocker = timers[last + 1]
  local wait = pp
  if blocker then wait = pp - (now - blocker) end
  if wait < 1000000 then wait = 1000000 end
  return {'wait', us(wait), last, ff}
end

if op == 'advance' then                        -- ARGV[2] nonce, [3] epoch, [4] failed, [5] ttl
  local my, epoch, failed = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
  local x = deadline(tonumber(ARGV[5]))
  local last = 0
  if view then last = val(view.c) end
  if stale(view, epoch) then return last end
  if drained(view) then return 0 end
  local new = copy(view)
  if failed and my > last then
    local existing = val(view.f)
    local marker = my
    if existing > 0 and existing < my then marker = existing end
    new.f = {v = marker, x = x}
  end
  local timers = timers_of(view)
  timers[my] = nil
  new.t = with_timers(view, timers)
  if my == last + 1 then
    last = my
    new.c = set_cursor(view, my)
    new = gc_if_drained(new)
  end
  store(new)
  return last
end

if op == 'heartbeat' then                      -- ARGV[2] nonce, ARGV[3] epoch
  local my, epoch = tonumber(ARGV[2]), tonumber(ARGV[3])
  if view == nil or stale(view, epoch) then return 0 end
  local timers = timers_of(view)
  if not timers[my] then return 0 end
  timers[my] = now
  local new = copy(view)
  new.t = with_timers(view, timers)
  store(new)
  return 1
end

if op == 'skip' then                           -- ARGV[2] nonce
  local nonce = tonumber(ARGV[2])
  if drained(view) then return 0 end
  local last = val(view.c)
  local timers = timers_of(view)
  timers[nonce] = nil
  local new = copy(view)
  new.t = with_timers(view, timers)
  if nonce > last then
    last = nonce
    new.c = set_cursor(view, nonce)
  end
  store(gc_if_drained(new))
  return last
end

if op == 'reset' then
  redis.call('DEL', K, T)
  if fence then
    redis.call('HSET', K, 'e', us(fence.v), 'ex', us(now))
    expire_at(K, now + R)
  end
  return 1
end

if op == 'peek' then
  if view == nil then return {0, 0, 0, 0} end
  local last = val(view.c)
  local out = {val(view.n), last, val(view.f), val(view.e)}
  if view.t then
    for nonce, at in pairs(view.t.v) do
      if nonce > last then out[#out + 1] = us(nonce); out[#out + 1] = us(at) end
    end
  end
  return out
end

return redis.error_reply('unknown ordered lock op ' .. op)
