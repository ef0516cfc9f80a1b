-- Stored schedules, compare-and-set on a version token (docs/protocol.md, "Schedules").
-- KEYS[1] hash name -> document, KEYS[2] hash name -> version, KEYS[3] sorted set of names
-- (score 0, read in lex order). ARGV[1] op ('put' | 'delete'), ARGV[2] name, ARGV[3] the
-- expected version ('' = none stored), ARGV[4] document (put), ARGV[5] new version (put).
local docs, versions, names = KEYS[1], KEYS[2], KEYS[3]
local op, name, expected = ARGV[1], ARGV[2], ARGV[3]
local current = redis.call('HGET', versions, name)
if current == false then current = '' end
if current ~= expected then return 0 end
if op == 'delete' then
  if current == '' then return 0 end
  redis.call('HDEL', docs, name)
  redis.call('HDEL', versions, name)
  redis.call('ZREM', names, name)
  return 1
end
redis.call('HSET', docs, name, ARGV[4])
redis.call('HSET', versions, name, ARGV[5])
redis.call('ZADD', names, 0, name)
return 1
