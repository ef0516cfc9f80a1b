-- The Redis Streams router. KEYS: 1 stream, 2 delayed zset (body -> due ms),
-- 3 dead-letter stream, 4 leases hash (entry id -> extended-until ms). ARGV[1] op.
local S, D, DL, L, op = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function ack(group, id)
  local n = redis.call('XACK', S, group, id)
  redis.call('XDEL', S, id)
  redis.call('HDEL', L, id)
  return n
end
local function put(body, delay_ms)
  if delay_ms <= 0 then
    redis.call('XADD', S, '*', 'body', body)
  else
    redis.call('ZADD', D, string.format('%.0f', now_ms + delay_ms), body)
  end
end

if op == 'promote' then            -- move due delayed jobs to the stream; returns how many
  local due = redis.call('ZRANGEBYSCORE', D, '-inf', now_ms, 'LIMIT', 0, 500)
  for _, body in ipairs(due) do
    redis.call('XADD', S, '*', 'body', body)
    redis.call('ZREM', D, body)
  end
  local nxt = redis.call('ZRANGE', D, 0, 0, 'WITHSCORES')
  local wait = -1
  if #nxt > 0 then wait = math.max(tonumber(nxt[2]) - now_ms, 0) end
  return {#due, wait}
elseif op == 'enqueue' then        -- ARGV[2] body, ARGV[3] delay ms
  put(ARGV[2], tonumber(ARGV[3]))
  return 1
elseif op == 'reclaim' then        -- ARGV[2] group, [3] consumer, [4] min idle ms, [5] count
  local group, consumer, idle, count = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  local pending = redis.call('XPENDING', S, group, 'IDLE', idle, '-', '+', count * 4)
  local out = {}
  for _, p in ipairs(pending) do
    if #out >= count * 3 then break end
    local id = p[1]
    local extended = tonumber(redis.call('HGET', L, id) or '0')
    if extended <= now_ms then
      local claimed = redis.call('XCLAIM', S, group, consumer, idle, id)
      redis.call('HDEL', L, id)
      local entry = claimed[1]
      if entry and entry[2] then
        local body = ''
        for i = 1, #entry[2], 2 do if entry[2][i] == 'body' then body = entry[2][i + 1] end end
        out[#out + 1] = id
        out[#out + 1] = tonumber(p[4]) + 1
        out[#out + 1] = body
      else
        redis.call('XACK', S, group, id)
      end
    end
  end
  return out
elseif op == 'ack' then            -- ARGV[2] group, ARGV[3] id; returns 1 when it was pending
  return ack(ARGV[2], ARGV[3])
elseif op == 'retry' then          -- ARGV[2] group, [3] id, [4] new body, [5] delay ms
  local n = ack(ARGV[2], ARGV[3])
  put(ARGV[4], tonumber(ARGV[5]))
  return n
elseif op == 'extend' then         -- ARGV[2] group, [3] consumer, [4] id, [5] seconds ms
  local claimed = redis.call('XCLAIM', S, ARGV[2], ARGV[3], 0, ARGV[4], 'JUSTID')
  if #claimed == 0 then return 0 end
  redis.call('HSET', L, ARGV[4], string.format('%.0f', now_ms + tonumber(ARGV[5])))
  return 1
elseif op == 'dead' then           -- ARGV[2] group, [3] id ('' = none), [4] body, [5] reason
  if ARGV[3] ~= '' then ack(ARGV[2], ARGV[3]) end
  redis.call('XADD', DL, '*', 'body', ARGV[4], 'reason', ARGV[5], 'at', tostring(now_ms))
  return 1
end
return redis.error_reply('unknown router op ' .. op)
