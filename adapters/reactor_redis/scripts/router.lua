-- The Redis Streams router. KEYS: 1 stream, 2 delayed zset (member -> due ms),
-- 3 dead-letter stream, 4 leases hash (entry id -> extended-until ms). ARGV[1] op.
-- A stream entry is {body = <envelope>} plus, after a retry, n = <deliveries before this
-- entry>, so the delivery count survives the re-add. A delayed zset member is the body, or
-- '#<n>#<body>' for a retried job (enqueued bodies are JSON objects: they start with '{').
-- Bodies are binary-safe: the router reads replies holding them undecoded.
-- A receipt is '<entry id>:<nonce>', the nonce being the entry's pending delivery counter when
-- it was delivered (XREADGROUP sets 1, each re-claim adds 1; extend's XCLAIM JUSTID keeps it).
-- ack/retry/extend/dead take the nonce and do nothing (return 0) unless the entry is still
-- pending with that counter: a receipt whose lease lapsed and was re-claimed is stale, and so
-- is an empty nonce.
-- A dead letter is an entry {body, reason, at} of the dead-letter stream; its entry id is the
-- dead letter's id. 'requeue' and 'purge' administer them (docs/workers.md, "Dead letters").
local S, D, DL, L, op = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Due times start from now rounded up to the ms, so a delay never ends early on this clock.
local due_base = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000)

-- Whether receipt nonce ``nonce`` is the current delivery of pending entry ``id``; the
-- second value is the entry's pending delivery counter. A lost group (NOGROUP) or an empty
-- nonce names no current delivery.
local function current(group, id, nonce)
  local p = redis.pcall('XPENDING', S, group, id, id, 1)
  if type(p) ~= 'table' or p.err or #p == 0 or nonce == '' then return false, 0 end
  return tostring(p[1][4]) == nonce, tonumber(p[1][4])
end
local function ack(group, id)
  local n = redis.call('XACK', S, group, id)
  redis.call('XDEL', S, id)
  redis.call('HDEL', L, id)
  return n
end
local function add(body, n)
  if n > 0 then
    redis.call('XADD', S, '*', 'body', body, 'n', tostring(n))
  else
    redis.call('XADD', S, '*', 'body', body)
  end
end
local function put(body, delay_ms, n)
  if delay_ms <= 0 then
    add(body, n)
  else
    local member = body
    if n > 0 then member = '#' .. tostring(n) .. '#' .. body end
    redis.call('ZADD', D, string.format('%.0f', due_base + delay_ms), member)
  end
end
-- A delivery count read from a stored field: a whole number of digits below 2^53, else 0 (a
-- foreign producer's 'inf' or '1e400' must not pin the count).
local function count_of(v)
  if type(v) ~= 'string' or #v > 15 or not string.match(v, '^%d+$') then return 0 end
  return tonumber(v)
end
-- The fields of a stream entry: body (or nil), n (0 when absent) and a text dump of all fields.
local function fields_of(flat)
  local body, n, dump = nil, 0, {}
  for i = 1, #flat, 2 do
    local k, v = flat[i], flat[i + 1]
    if k == 'body' then body = v elseif k == 'n' then n = count_of(v) end
    dump[#dump + 1] = k .. '=' .. v
  end
  return body, n, table.concat(dump, '\n')
end

-- Move due delayed jobs (at most 500) to the stream; returns the wait in ms until the next
-- delayed job is due (-1: none).
local function promote()
  local due = redis.call('ZRANGEBYSCORE', D, '-inf', now_ms, 'LIMIT', 0, 500)
  for _, member in ipairs(due) do
    local body, n = member, 0
    if string.byte(member, 1) == 35 then   -- '#<n>#<body>'
      local stop = string.find(member, '#', 2, true)
      if stop then
        n = count_of(string.sub(member, 2, stop - 1))
        body = string.sub(member, stop + 1)
      end
    end
    add(body, n)
    redis.call('ZREM', D, member)
  end
  local nxt = redis.call('ZRANGE', D, 0, 0, 'WITHSCORES')
  local wait = -1
  if #nxt > 0 then wait = math.max(tonumber(nxt[2]) - now_ms, 0) end
  return wait
end
-- Append one delivery to the flat reply `out`: receipt, delivery count, has-body flag, body
-- (or a dump of the fields when the entry has no body).
local function deliver(out, receipt, count, flat)
  local body, n, dump = fields_of(flat)
  out[#out + 1] = receipt
  out[#out + 1] = count + n
  out[#out + 1] = body and 1 or 0
  out[#out + 1] = body or dump
end
-- Re-claim for `consumer` up to `count` entries idle at least `idle` ms whose lease was not
-- extended past now (a dead consumer's jobs), appending each delivery to `out`. The delivery
-- count is the pending counter after the claim (plus the entry's n). An entry deleted from
-- the stream meanwhile is acked away.
-- Idle entries whose lease was extended past now are skipped: the scan pages on past them
-- (at most 10 pages of max(4 * count, 100) entries per call), so leases extended beyond the
-- timeout never hide an abandoned delivery behind them.
local function reclaim(out, group, consumer, idle, count)
  local stop = #out + count * 4
  local page = math.max(count * 4, 100)
  local start = '-'
  for _ = 1, 10 do
    local pending = redis.call('XPENDING', S, group, 'IDLE', idle, start, '+', page)
    for _, p in ipairs(pending) do
      if #out >= stop then return end
      local id = p[1]
      local extended = tonumber(redis.call('HGET', L, id) or '0')
      if extended <= now_ms then
        local claimed = redis.call('XCLAIM', S, group, consumer, idle, id)
        redis.call('HDEL', L, id)
        local entry = claimed[1]
        if entry and entry[2] then
          local nonce = tonumber(p[4]) + 1
          deliver(out, id .. ':' .. tostring(nonce), nonce, entry[2])
        else
          redis.call('XACK', S, group, id)
        end
      end
    end
    if #pending < page or #out >= stop then return end
    start = '(' .. pending[#pending][1]
  end
end

if op == 'enqueue' then            -- ARGV[2] body, ARGV[3] delay ms
  put(ARGV[2], tonumber(ARGV[3]), 0)
  return 1
elseif op == 'enqueue_many' then   -- ARGV[2..] bodies, all due now, in order; returns how many
  for i = 2, #ARGV do add(ARGV[i], 0) end
  return #ARGV - 1
elseif op == 'receive' then        -- ARGV[2] group, [3] consumer, [4] min idle ms, [5] count
  -- A whole non-blocking receive pass in one call: promote, reclaim, then XREADGROUP (no
  -- BLOCK: not allowed in scripts) for the rest of the count. Returns the wait in ms until the
  -- next delayed job (-1: none), then per delivery: receipt, delivery count, has-body flag,
  -- body (or a dump of the fields). A freshly read entry's receipt is '<id>:1', its count 1 + n.
  local group, consumer, count = ARGV[2], ARGV[3], tonumber(ARGV[5])
  local out = {promote()}
  reclaim(out, group, consumer, tonumber(ARGV[4]), count)
  local want = count - (#out - 1) / 4
  if want > 0 then
    local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', want,
      'STREAMS', S, '>')
    if read then
      for _, entry in ipairs(read[1][2]) do
        if entry[2] then deliver(out, entry[1] .. ':1', 1, entry[2]) end
      end
    end
  end
  return out
elseif op == 'ack' then            -- ARGV[2] group, [3] id, [4] nonce; 1 when it was current
  if not current(ARGV[2], ARGV[3], ARGV[4] or '') then return 0 end
  return ack(ARGV[2], ARGV[3])
elseif op == 'retry' then  -- ARGV[2] group, [3] id, [4] delay ms, [5] nonce
  -- Re-adds the entry's own body (unchanged) carrying the deliveries so far (its pending
  -- counter plus its n), so the next delivery counts one more; 0 when stale.
  local live, counter = current(ARGV[2], ARGV[3], ARGV[5] or '')
  if not live then return 0 end
  local entry = redis.call('XRANGE', S, ARGV[3], ARGV[3])[1]
  if ack(ARGV[2], ARGV[3]) == 0 or not entry then return 0 end
  local body, n = fields_of(entry[2])
  if not body then return 0 end
  local count = math.min(math.max(counter + n, 1), 9007199254740991)
  put(body, tonumber(ARGV[4]), count)
  return 1
elseif op == 'extend' then    -- ARGV[2] group, [3] consumer, [4] id, [5] seconds ms, [6] nonce
  if not current(ARGV[2], ARGV[4], ARGV[6] or '') then return 0 end
  local claimed = redis.call('XCLAIM', S, ARGV[2], ARGV[3], 0, ARGV[4], 'JUSTID')
  if #claimed == 0 then return 0 end
  redis.call('HSET', L, ARGV[4], string.format('%.0f', due_base + tonumber(ARGV[5])))
  return 1
elseif op == 'dead' then
  -- ARGV[2] group, [3] id, [4] body, [5] reason, [6] nonce, [7] at ms ('' = now)
  -- The entry's own stored body wins over ARGV[4], and a dump of its fields over an empty
  -- ARGV[4] (an entry without a body). A stale receipt (the entry was acked, retried or
  -- re-claimed since) dead-letters nothing and returns 0.
  local body = ARGV[4]
  if not current(ARGV[2], ARGV[3], ARGV[6] or '') then return 0 end
  local entry = redis.call('XRANGE', S, ARGV[3], ARGV[3])[1]
  if entry then
    local stored, _, dump = fields_of(entry[2])
    body = stored or (body ~= '' and body) or dump
  end
  ack(ARGV[2], ARGV[3])
  local at = now_ms
  if ARGV[7] and ARGV[7] ~= '' then at = tonumber(ARGV[7]) end
  redis.call('XADD', DL, '*', 'body', body, 'reason', ARGV[5], 'at', string.format('%.0f', at))
  return 1
elseif op == 'requeue' then        -- ARGV[2] dead-letter id; 1 when it was moved to the stream
  -- Claim, enqueue and remove in one atomic step: the dead entry is re-added to the stream
  -- as a new entry (no 'n' field: a fresh delivery count) and deleted. 0 when it is gone
  -- (never was, purged, or requeued by a concurrent caller first).
  local entry = redis.call('XRANGE', DL, ARGV[2], ARGV[2])[1]
  if not entry then return 0 end
  local body = fields_of(entry[2])
  if not body then return 0 end
  add(body, 0)
  redis.call('XDEL', DL, ARGV[2])
  return 1
elseif op == 'purge' then          -- ARGV[2..] dead-letter ids (none: all); returns how many
  if #ARGV < 2 then
    local n = redis.call('XLEN', DL)
    redis.call('DEL', DL)
    return n
  end
  local n = 0
  for i = 2, #ARGV do n = n + redis.call('XDEL', DL, ARGV[i]) end
  return n
elseif op == 'leave' then          -- ARGV[2] group, [3] consumer; 1 when it was deleted
  -- A consumer leaves only with no pending entries (deleting one drops its pending list).
  if redis.call('EXISTS', S) == 0 then return 0 end
  if #redis.call('XPENDING', S, ARGV[2], '-', '+', 1, ARGV[3]) > 0 then return 0 end
  return redis.call('XGROUP', 'DELCONSUMER', S, ARGV[2], ARGV[3]) >= 0 and 1 or 0
elseif op == 'prune' then          -- ARGV[2] group, [3] min idle ms; returns how many deleted
  -- Deletes consumers idle at least ARGV[3] ms that hold no pending entry (their entries
  -- were re-claimed by live consumers first: the 'receive' op). A deleted consumer that
  -- is in fact alive is re-created by its next XREADGROUP, so nothing is lost.
  if redis.call('EXISTS', S) == 0 then return 0 end
  local idle_min, deleted = tonumber(ARGV[3]), 0
  for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', S, ARGV[2])) do
    local info = {}
    for i = 1, #c, 2 do info[c[i]] = c[i + 1] end
    if tonumber(info['pending']) == 0 and tonumber(info['idle']) >= idle_min then
      redis.call('XGROUP', 'DELCONSUMER', S, ARGV[2], info['name'])
      deleted = deleted + 1
    end
  end
  return deleted
end
return redis.error_reply('unknown router op ' .. op)
