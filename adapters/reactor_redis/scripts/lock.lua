-- Re-entrant owner-tokened TTL lock with fencing tokens (reactor.model.coordination.locks,
-- line by line; docs/coordination.md#fencing-tokens).
-- KEYS[1] hash {o: owner, n: count, x: expiry µs or -1, f: fencing token}; a released lock is a
-- tombstone {x: release µs, f: token} (no o, no n). The native expiry is x + retention, so a
-- lapsed lock or a tombstone keeps its token that long. ARGV[1] op, ARGV[2] owner, then
-- acquire/extend: ARGV[3] ttl_us (-1 = none), ARGV[4] retention_us; release: ARGV[3] retention_us.
-- Returns acquire: the token or 0; release/extend: 1/0; info: {owner, count, x, f} or nil.
return lock_call(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
