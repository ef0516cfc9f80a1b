-- List live contexts of one shard from several index sets (indexed scan, never KEYS), keyset
-- paged in (index, score = expiry µs, id) order. KEYS[1] any key of the shard (routing).
-- ARGV: index prefix, record prefix, row limit, examine budget, resume score ('' = from the
-- start of the first name), resume member, names...
-- Returns {rows, last name, last score, last member, done}: rows flat, 7 values each (id
-- reactor status created updated parent child); the last position examined (stale members,
-- pruned on the way, included); done = 1 once every name was read to its end.
local prefix, rec = ARGV[1], ARGV[2]
local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_us()
local out, n, seen = {}, 0, 0
local lname, lscore, lmember = '', '', ''
for i = 7, #ARGV do
  local name = ARGV[i]
  local idx = prefix .. name
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', us(now))
  local start = 0
  if i == 7 and ARGV[5] ~= '' then start = rank_after(idx, ARGV[5], ARGV[6]) end
  while true do
    if n >= limit or seen >= budget then return {out, lname, lscore, lmember, 0} end
    local take = math.min(limit - n, budget - seen, 100)
    local batch = redis.call('ZRANGE', idx, start, start + take - 1, 'WITHSCORES')
    if #batch == 0 then break end
    local removed = 0
    for j = 1, #batch, 2 do
      local id = batch[j]
      seen = seen + 1
      lname, lscore, lmember = name, batch[j + 1], id
      local r = redis.call('HMGET', rec .. id, 'id', 'reactor', 'status', 'created_at',
        'updated_at', 'parent', 'child', '_idx')
      if r[1] and r[8] == name then
        for k = 1, 7 do out[#out + 1] = r[k] or '' end
        n = n + 1
      else
        redis.call('ZREM', idx, id)
        removed = removed + 1
      end
    end
    start = start + #batch / 2 - removed
  end
end
return {out, lname, lscore, lmember, 1}
