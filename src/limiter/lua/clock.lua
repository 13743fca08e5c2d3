-- The clock is the store's own (TIME): every instance sharing this store buckets its calls on
-- one clock, however late its request reached Redis (SPEC §3's bound is across instances).
local t = redis.call('TIME')
local storeNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
