-- The window layout both scripts share (SPEC §3, §5), and the store's clock; each script is this
-- prelude followed by its own program (limiter/script.ts joins them before registering). What
-- reads a window's buckets is `windows.lua`, which a script includes where it needs it: a
-- function in Lua is made anew on every run of the script, so the commonest check answers
-- before any is made (issue #47).
--
-- Sliding windows (windowMs > 0): the key is a hash of buckets, field = bucket index
-- (floor(ms / bucketMs)), value = calls admitted in it. bucketMs = windowMs / buckets, so a
-- call is counted until the end of its bucket plus one window: never early, at most
-- 1/buckets of the window late. A key holds at most buckets + 1 live bucket fields whatever
-- the limit, and expires when idle.
--
-- Layout 2 (issue #14; the key's name says `:l2`): the hash also keeps the running total of
-- its live buckets (`t`) and the oldest bucket that holds calls (`o`). A call reads those two,
-- subtracts the buckets that left the window since the last call (each bucket once in its
-- life, so O(1) per call amortised), and adds itself to its bucket and to the total.
--
-- Calendar windows (windowMs = 0, the monthly quota): the key is the team's ledger for one
-- month, a hash: `used` (the month's count), `d<DD>` (its calls per day), `c<DD>` (credited
-- per day), `q` (the quota in force at the last charge), `s:<process>` (late batches applied).
--
-- The clock is the store's own (TIME): every instance sharing this store buckets its calls on
-- one clock, however late its request reached Redis (SPEC §3's bound is across instances).

local t = redis.call('TIME')
local storeNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- A bucket's field name. Lua formats a number it hands to Redis with "%.14g" (the C library's
-- floating-point printer: a microsecond or more for a ten-digit index); "%d" is an integer's.
local function field(b)
  return string.format('%d', b)
end
