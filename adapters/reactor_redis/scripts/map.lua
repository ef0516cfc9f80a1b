-- Every write of one map's forward and rollback state, each re-stamping ALL the map's keys
-- (KEYS, one hash tag) to the retention together. ARGV[1] ttl_us, ARGV[2] op, then args.
-- An op that writes nothing returns before the re-stamp (a lost NX; 'begin' when it appends
-- nothing: then it is a pure read).
-- KEYS: 1 metadata 2 counter 3 offset 4 failed 5 owner_signal 6 results 7 elements
--       8 rb:metadata 9 rb:offset 10 rb:outcomes 11 rb:indexes 12 rb:handed_off
--       13 rb:signal 14 rb:failed; 'settle' only: 15 the element's lock hash to release
--       (never re-stamped: it is not the map's)
local ttl, op = tonumber(ARGV[1]), ARGV[2]
local result
if op == 'init' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('SET', KEYS[2], ARGV[4])
  result = 1
elseif op == 'add' then
  result = redis.call('INCRBY', KEYS[2], ARGV[3])
elseif op == 'init_offset' then
  if not redis.call('SET', KEYS[3], ARGV[3], 'NX') then return 0 end
  result = 1
elseif op == 'advance' then
  result = redis.call('INCRBY', KEYS[3], ARGV[3])
elseif op == 'fail' then
  if not redis.call('SET', KEYS[4], ARGV[3], 'NX') then return 0 end
  result = 1
elseif op == 'owner' then
  if not redis.call('SET', KEYS[5], '1', 'NX') then return 0 end
  result = 1
elseif op == 'put' then
  redis.call('HSET', KEYS[6], ARGV[3], ARGV[4])
  result = 1
elseif op == 'append' then
  result = redis.call('RPUSH', KEYS[7], ARGV[3]) - 1
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
elseif op == 'settle' then  -- ARGV[3] index, [4] value, [5] failed context ('': none),
  -- [6] lock owner, [7] lock retention_us (absent: no lock)
  -- One element settled, in the order of its calls: the failed context (first wins), the
  -- slot, the counter - 1; then the element's lock KEYS[15] released when given
  -- (docs/protocol.md, "Optional fast paths"). Returns the counter.
  if ARGV[5] ~= nil and ARGV[5] ~= '' then redis.call('SET', KEYS[4], ARGV[5], 'NX') end
  redis.call('HSET', KEYS[6], ARGV[3], ARGV[4])
  result = redis.call('INCRBY', KEYS[2], -1)
  if KEYS[15] then lock_call(KEYS[15], 'release', ARGV[6], ARGV[7]) end
elseif op == 'rb_start' then
  local existing = redis.call('GET', KEYS[8])
  if existing then return {0, existing} end
  redis.call('SET', KEYS[8], ARGV[3])
  result = {1, ARGV[3]}
elseif op == 'rb_claim' then
  local stop = redis.call('INCRBY', KEYS[9], ARGV[3])
  result = {stop, redis.call('GET', KEYS[8]) or ''}
elseif op == 'rb_outcome' then
  if redis.call('HSETNX', KEYS[10], ARGV[3], ARGV[4]) == 0 then return 0 end
  if ARGV[5] ~= '' then redis.call('SADD', KEYS[11], ARGV[5]) end
  if ARGV[6] == '1' then redis.call('INCR', KEYS[14]) end
  result = 1
elseif op == 'rb_handoff' then
  redis.call('SET', KEYS[12], '1')
  result = 1
elseif op == 'rb_signal' then
  if not redis.call('SET', KEYS[13], '1', 'NX') then return 0 end
  result = 1
else
  return redis.error_reply('unknown map op ' .. op)
end
restamp_all(ttl, 14)
return result
