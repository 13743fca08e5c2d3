-- The window layout both scripts share (SPEC §3, §5); each script is the store's clock
-- (clock.lua), this prelude and its own program (limiter/redis-store.ts joins them before
-- registering; the check answers its commonest call between the clock and this).
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

-- A bucket's field name. Lua formats a number it hands to Redis with "%.14g" (the C library's
-- floating-point printer: a microsecond or more for a ten-digit index); "%d" is an integer's.
local function field(b)
  return string.format('%d', b)
end

-- The bucket fields of key among indices [from, to] (HMGET: nil where a bucket is empty).
local function bucketsIn(key, from, to)
  local range = {}
  for b = from, to do range[#range + 1] = field(b) end
  if #range == 0 then return range, {} end
  return range, redis.call('HMGET', key, unpack(range))
end

-- The first bucket of key among indices [from, to] that holds calls, or nil. Read a few at a
-- time, doubling: the bucket after one that left usually holds calls (a steady caller), and a
-- read of the whole window (buckets + 1 fields, each a scan of the hash) cost more than the
-- rest of a call.
local function firstHeld(key, from, to)
  local step = 2
  while from <= to do
    local last = math.min(from + step - 1, to)
    local _, got = bucketsIn(key, from, last)
    for j = 1, last - from + 1 do
      if got[j] then return from + j - 1 end
    end
    from = last + 1
    step = step * 2
  end
  return nil
end
