-- List live records of one shard by status index, keyset paged in (status, score = expiry µs,
-- member) order. KEYS[1] routing key of the shard.
-- ARGV: index prefix, record prefix, limit, examine budget, resume score ('' = from the start
-- of the first status), resume member, statuses...
-- Returns {records' JSON texts, last status, last score, last member, done} (see
-- context_scan.lua).
local prefix, rec = ARGV[1], ARGV[2]
local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_us()
local out, seen = {}, 0
local lname, lscore, lmember = '', '', ''
for i = 7, #ARGV do
  local name = ARGV[i]
  local idx = prefix .. name
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', us(now))
  local start = 0
  if i == 7 and ARGV[5] ~= '' then start = rank_after(idx, ARGV[5], ARGV[6]) end
  while true do
    if #out >= limit or seen >= budget then return {out, lname, lscore, lmember, 0} end
    local take = math.min(limit - #out, budget - seen, 100)
    local batch = redis.call('ZRANGE', idx, start, start + take - 1, 'WITHSCORES')
    if #batch == 0 then break end
    local removed = 0
    for j = 1, #batch, 2 do
      local m = batch[j]
      seen = seen + 1
      lname, lscore, lmember = name, batch[j + 1], m
      local r = redis.call('HMGET', rec .. m, 's', 'j')
      if r[1] == name and r[2] then
        out[#out + 1] = r[2]
      else
        redis.call('ZREM', idx, m)
        removed = removed + 1
      end
    end
    start = start + #batch / 2 - removed
  end
end
return {out, lname, lscore, lmember, 1}
