-- First-writer-wins claims on one key. KEYS[1] the claim. ARGV[1] ttl_us, ARGV[2] op.
local key, ttl, op = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local cur = redis.call('GET', key)
if op == 'correlation' then        -- ARGV[3] context id; returns the other holder or nil
  if cur and cur ~= ARGV[3] then return cur end
  redis.call('SET', key, ARGV[3])
elseif op == 'nx' then             -- ARGV[3] value; returns nil when claimed, else holder
  if cur then return cur end
  redis.call('SET', key, ARGV[3])
elseif op == 'release' then        -- ARGV[3] holder; compare-and-delete
  if cur ~= ARGV[3] then return 0 end
  return redis.call('DEL', key)
elseif op == 'reclaim' then        -- ARGV[3] from, ARGV[4] to; compare-and-set
  if cur ~= ARGV[3] then return 0 end
  redis.call('SET', key, ARGV[4])
  cur = 1
elseif op == 'incr' then
  cur = redis.call('INCR', key)
else
  return redis.error_reply('unknown claim op ' .. op)
end
restamp_all(ttl)
if op == 'reclaim' or op == 'incr' then return cur end
return false
