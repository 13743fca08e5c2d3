-- SPEC §11 reading a candidate: the key-days a report reads, each as HGETALL's list of fields
-- and values, in KEYS order (one call for many; on Redis Cluster the caller groups them by
-- slot). A script rather than HGETALL itself: ioredis turns an HGETALL reply into an object
-- keyed by strings, which cost a 100,000-key report more than the reading; shape-store.ts reads
-- the list by its bytes.
--
-- KEYS[k]  a key-day's hash (shape-add.lua names its fields)
-- Returns one list per key: field, value, field, value… (empty for a key that is gone).

local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('HGETALL', key)
end
return out
