-- Take a run's liveness lock and read its record in one round trip (docs/protocol.md,
-- "Optional fast paths"): the lock as lock.lua's 'acquire', then, only when granted, the record
-- hash, its segment list (as the MULTI/EXEC of a plain load reads them) and the run's claims
-- named by KEYS[4..] (as ClaimStore.interrupt_resumes reads them; a run's cancel request).
-- KEYS[1] lock hash, KEYS[2] record hash, KEYS[3] segment list, KEYS[4..] claim keys. ARGV:
-- owner, ttl_us (-1 = none), retention_us.
-- Returns {0} when another owner holds the lock (nothing read); else {token, the hash as a
-- flat field/value list, the segment list, the claim values (false where absent)}.
local granted = lock_call(KEYS[1], 'acquire', ARGV[1], ARGV[2], ARGV[3])
if granted == 0 then return {0} end
local claims = {}
for i = 4, #KEYS do claims[#claims + 1] = redis.call('GET', KEYS[i]) end
return {granted, redis.call('HGETALL', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1), claims}
