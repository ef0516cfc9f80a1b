-- Trim one shard's index sets: drop members whose record has expired, by score (the record's
-- expiry in µs), and up to a budget of the oldest page entries whose record is gone.
-- KEYS[1] the shard's page set when ARGV[2] ~= '', else any key of the shard (routing).
-- ARGV: index prefix, record prefix ('' = no page set), page budget, index names...
-- Returns how many members were removed.
local prefix, rec, budget = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_us()
local removed = 0
for i = 4, #ARGV do
  removed = removed + redis.call('ZREMRANGEBYSCORE', prefix .. ARGV[i], '-inf', us(now))
end
if rec ~= '' and budget > 0 then
  -- page keys sort newest first: the oldest (likeliest expired) entries are at the end
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], -budget, -1)) do
    if redis.call('EXISTS', rec .. string.sub(member, 19)) == 0 then
      redis.call('ZREM', KEYS[1], member)
      removed = removed + 1
    end
  end
end
return removed
