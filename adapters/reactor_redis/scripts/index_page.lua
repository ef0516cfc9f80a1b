-- One keyset page of a sweeper index (a sorted set of map ids). KEYS[1] the index.
-- ARGV: resume score ('' = from the start), resume member, count.
-- Returns flat member, score pairs in (score, member) order, strictly after the position.
local idx, count = KEYS[1], tonumber(ARGV[3])
local start = 0
if ARGV[1] ~= '' then start = rank_after(idx, ARGV[1], ARGV[2]) end
return redis.call('ZRANGE', idx, start, start + count - 1, 'WITHSCORES')
