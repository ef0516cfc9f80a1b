-- Every write of one map's forward and rollback state. ARGV[1] ttl_us, ARGV[2] op, then args.
-- ALL the map's keys (KEYS, one hash tag) expire together, ttl after the map's last write
-- (up to 0.9 s later): a re-stamp gives every key ttl + 0.9 s, and a write made while the
-- metadata key still has ttl left gives only the keys it wrote the metadata's expiry (one
-- PTTL and a PEXPIRE per written key instead of 14 PEXPIRE: a burst of writes re-stamps
-- all the keys about once per 0.9 s). An op that writes nothing returns before the re-stamp (a lost NX; 'begin' when it
-- appends nothing: then it is a pure read).
-- KEYS: 1 metadata 2 counter 3 offset 4 failed 5 owner_signal 6 results 7 elements
--       8 rb:metadata 9 rb:offset 10 rb:outcomes 11 rb:indexes 12 rb:handed_off
--       13 rb:signal 14 rb:failed; 'settle' only: 15 the element's lock hash to release
--       (never re-stamped: it is not the map's)
local ttl, op = tonumber(ARGV[1]), ARGV[2]
local result
local written  -- the KEYS indexes this op wrote
-- Give the keys this op wrote the map's expiry when the metadata key has ttl left, else
-- re-stamp all 14 to ttl + the slack (-1: persist them all).
local function restamp_map()
  if ttl < 0 then return restamp_all(ttl, 14) end
  local ms = math.max(math.floor(ttl / 1000), 1)
  local left = redis.call('PTTL', KEYS[1])  -- -2 absent, -1 no expiry
  if left >= ms then
    for _, i in ipairs(written) do redis.call('PEXPIRE', KEYS[i], left) end
    return
  end
  return restamp_all((ms + math.min(math.floor(ms / 8), 900)) * 1000, 14)
end
if op == 'init' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('SET', KEYS[2], ARGV[4])
  result, written = 1, {1, 2}
elseif op == 'add' then
  result, written = redis.call('INCRBY', KEYS[2], ARGV[3]), {2}
elseif op == 'init_offset' then
  if not redis.call('SET', KEYS[3], ARGV[3], 'NX') then return 0 end
  result, written = 1, {3}
elseif op == 'advance' then
  result, written = redis.call('INCRBY', KEYS[3], ARGV[3]), {3}
elseif op == 'fail' then
  if not redis.call('SET', KEYS[4], ARGV[3], 'NX') then return 0 end
  result, written = 1, {4}
elseif op == 'owner' then
  if not redis.call('SET', KEYS[5], '1', 'NX') then return 0 end
  result, written = 1, {5}
elseif op == 'put' then
  redis.call('HSET', KEYS[6], ARGV[3], ARGV[4])
  result, written = 1, {6}
elseif op == 'append' then
  result, written = redis.call('RPUSH', KEYS[7], ARGV[3]) - 1, {7}
elseif op == 'begin' then  -- ARGV[3] index, [4] element context id (absent: none)
  -- An element job's reads (docs/protocol.md, "Optional fast paths"): metadata, whether slot
  -- ARGV[3] is stored, the failed context; then, for a fresh element (ARGV[4]) of a known map
  -- whose slot is absent and with no failed element, the append. Returns {metadata or nil,
  -- 1/0 slot stored, failed context or nil, position or -1}.
  local meta = redis.call('GET', KEYS[1])
  local stored = redis.call('HEXISTS', KEYS[6], ARGV[3])
  local failed = redis.call('GET', KEYS[4])
  if ARGV[4] == nil or not meta or stored == 1 or failed then
    return {meta, stored, failed, -1}  -- read only: nothing written, nothing re-stamped
  end
  result = {meta, stored, failed, redis.call('RPUSH', KEYS[7], ARGV[4]) - 1}
  written = {7}
elseif op == 'settle' then  -- ARGV[3] index, [4] value, [5] failed context ('': none),
  -- [6] lock owner, [7] lock retention_us (absent: no lock)
  -- One element settled, in the order of its calls: the failed context (first wins), the
  -- slot, the counter - 1; then the element's lock KEYS[15] released when given
  -- (docs/protocol.md, "Optional fast paths"). Returns the counter.
  if ARGV[5] ~= nil and ARGV[5] ~= '' then redis.call('SET', KEYS[4], ARGV[5], 'NX') end
  redis.call('HSET', KEYS[6], ARGV[3], ARGV[4])
  result, written = redis.call('INCRBY', KEYS[2], -1), {2, 4, 6}
  if KEYS[15] then lock_call(KEYS[15], 'release', ARGV[6], ARGV[7]) end
elseif op == 'rb_start' then
  local existing = redis.call('GET', KEYS[8])
  if existing then return {0, existing} end
  redis.call('SET', KEYS[8], ARGV[3])
  result, written = {1, ARGV[3]}, {8}
elseif op == 'rb_claim' then
  local stop = redis.call('INCRBY', KEYS[9], ARGV[3])
  result, written = {stop, redis.call('GET', KEYS[8]) or ''}, {9}
elseif op == 'rb_outcome' then
  if redis.call('HSETNX', KEYS[10], ARGV[3], ARGV[4]) == 0 then return 0 end
  if ARGV[5] ~= '' then redis.call('SADD', KEYS[11], ARGV[5]) end
  if ARGV[6] == '1' then redis.call('INCR', KEYS[14]) end
  result, written = 1, {10, 11, 14}
elseif op == 'rb_handoff' then
  redis.call('SET', KEYS[12], '1')
  result, written = 1, {12}
elseif op == 'rb_signal' then
  if not redis.call('SET', KEYS[13], '1', 'NX') then return 0 end
  result, written = 1, {13}
else
  return redis.error_reply('unknown map op ' .. op)
end
restamp_map()
return result
