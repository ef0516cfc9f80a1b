-- One shard's part of a newest-first page. KEYS[1] page set. ARGV: record prefix, after
-- ('' = from the start), limit. Stale entries (record gone) are dropped on the way.
-- Returns flat rows of 8 values: page key id reactor status created updated parent child.
local pages, rec, after, limit = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])
local out, n = {}, 0
local from = '-'
if after ~= '' then from = '(' .. after end
while n < limit do
  local batch = redis.call('ZRANGEBYLEX', pages, from, '+', 'LIMIT', 0, limit - n)
  if #batch == 0 then break end
  for _, member in ipairs(batch) do
    local id = string.sub(member, 19)
    local r = redis.call('HMGET', rec .. id, 'id', 'reactor', 'status', 'created_at',
      'updated_at', 'parent', 'child', '_page')
    if r[1] and r[8] == member then
      out[#out + 1] = member
      for j = 1, 7 do out[#out + 1] = r[j] or '' end
      n = n + 1
    else
      redis.call('ZREM', pages, member)
    end
    from = '(' .. member
  end
end
return out
