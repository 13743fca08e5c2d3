-- Check-and-charge for every window of one request, all or nothing (SPEC §3, §5).
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
-- life, so O(1) per call amortised), and adds itself to its bucket and to the total. Reading
-- every bucket (HGETALL and a tonumber loop: 28 µs of Redis time for 50 buckets, against 3 for
-- the two fields) is left to the rare call that is refused, to tell when it would fit.
--
-- Calendar windows (windowMs = 0, the monthly quota): the key is a plain counter for one
-- month; it admits until `limit` and resets at endMs. Its limit may be overridden by the
-- `quota` field of another key (a team changed through the admin API), read here so that a
-- raised quota applies on every instance from the next request.
--
-- The clock is the store's own (TIME): every instance sharing this store buckets its calls on
-- one clock, however late its request reached Redis (SPEC §3's bound is across instances).
--
-- KEYS[1..n]          the windows' keys; KEYS[n+1..] limit-override keys
-- ARGV[1]             buckets per sliding window (BUCKETS_PER_WINDOW, defined once in types.ts)
-- ARGV[2]             cost of this call (1)
-- ARGV[3]             mode: 0 = check and charge; 1 = peek (read only, charge and delete
--                     nothing); 3 = give back (below)
-- ARGV[4]             mode 0: a deadline on the store's clock (ms), or 0: past it the caller
--                     has given up (its timeout), so the call is neither admitted nor charged
-- ARGV[5]             now (ms) on the caller's clock, or 0 for the store's (TIME; production).
--                     A caller's clock serves tests that drive time by hand.
-- ARGV[6 + 6(i-1)]    window i: limit
-- ARGV[7 + 6(i-1)]    window i: length in ms, or 0 for a calendar window
-- ARGV[8 + 6(i-1)]    window i: calendar window end (ms), else 0
-- ARGV[9 + 6(i-1)]    window i: index in KEYS of its limit-override key, else 0
-- ARGV[10 + 6(i-1)]   window i: 1 when it is a dry-run rule (never refuses; not charged when
--                     over, so its count shows what enforcing it would admit), else 0
-- ARGV[11 + 6(i-1)]   window i: mode 0: a lease asked for (limiter/leases.ts): the calls to
--                     charge now, this one and the share the caller will admit by itself until
--                     the bucket ends; granted only while the window stays at or under half
--                     its limit with it, else the call is charged alone. 0: no lease.
--                     Mode 3: the calls to give back.
--
-- Mode 3 takes back calls charged earlier, with no check: the unused part of a lease, or a
-- call charged on one Cluster slot and refused on another (limiter/redis-store.ts). A sliding
-- window's calendar-end field (ARGV[8 + 6(i-1)]) carries the store time of the charge, so the
-- calls leave their own bucket, and only if that bucket still holds them (one that left the
-- window took its calls with it); a calendar counter gives back only what it holds.
--
-- Returns { allowed, now, storeNow, used_1, resetAt_1, retryAt_1, limit_1, charged_1, used_2, ... }:
-- allowed is 1, 0, or -1 for a deadline passed; now is the clock the times are on (the
-- store's, unless the caller gave its own); storeNow is the store's clock; used includes this call
-- when it was charged; resetAt is when the oldest counted call leaves (calendar: the end);
-- retryAt (windows over their limit only, else 0) is when a call would fit again; limit is
-- the limit applied; charged is what this call added to the window (a lease: its whole share).

local t = redis.call('TIME')
local storeNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now = tonumber(ARGV[5])
if now == 0 then now = storeNow end
local buckets = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local peek = ARGV[3] == '1'
local at = tonumber(ARGV[4])
local n = (#ARGV - 5) / 6
local W = 6

if ARGV[3] == '0' and at > 0 and storeNow > at then
  return { -1, now, storeNow }
end

-- The bucket fields of key among indices [from, to] (HMGET: nil where a bucket is empty).
local function bucketsIn(key, from, to)
  local range = {}
  for b = from, to do range[#range + 1] = b end
  if #range == 0 then return range, {} end
  return range, redis.call('HMGET', key, unpack(range))
end

-- The first bucket of key among indices [from, to] that holds calls, or nil.
local function firstHeld(key, from, to)
  local range, got = bucketsIn(key, from, to)
  for j = 1, #range do
    if got[j] then return range[j] end
  end
  return nil
end

-- Drops the buckets that left the window (index < oldest) from the total; returns the new
-- total and the oldest bucket still holding calls (nil when none). Writes nothing on a peek.
local function expire(key, sum, first, oldest, cur, buckets, peek)
  local gone = {}
  if oldest - first > 2 * buckets + 2 then
    -- Idle past its expiry (a caller's clock moved by hand): one read of every field.
    local flat = redis.call('HGETALL', key)
    for j = 1, #flat, 2 do
      local b = tonumber(flat[j])
      if b ~= nil and b < oldest then
        gone[#gone + 1] = flat[j]
        sum = sum - tonumber(flat[j + 1])
      end
    end
  else
    local range, got = bucketsIn(key, first, oldest - 1)
    for j = 1, #range do
      if got[j] then
        gone[#gone + 1] = range[j]
        sum = sum - tonumber(got[j])
      end
    end
  end
  local nextFirst = nil
  if sum > 0 then nextFirst = firstHeld(key, oldest, cur) end
  -- No live bucket left: the total is 0 (it can only disagree if the hash was edited by hand).
  if nextFirst == nil then sum = 0 end
  if not peek then
    if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
    if nextFirst == nil then
      redis.call('HDEL', key, 't', 'o')
    else
      redis.call('HSET', key, 't', sum, 'o', nextFirst)
    end
  end
  return sum, nextFirst
end

-- Takes `units` calls back from bucket `bucket` of a sliding window, only if it holds them.
local function giveBack(key, bucket, units)
  local held = tonumber(redis.call('HGET', key, bucket) or '0')
  if units <= 0 or held < units then return end
  local total = redis.call('HINCRBY', key, 't', -units)
  if held > units then
    redis.call('HINCRBY', key, bucket, -units)
    return
  end
  -- An emptied bucket goes, so that `o` (and resetAt) only ever name a bucket with calls.
  redis.call('HDEL', key, bucket)
  if tonumber(redis.call('HGET', key, 'o')) ~= bucket then return end
  local nextFirst = firstHeld(key, bucket + 1, bucket + buckets + 1)
  if nextFirst == nil or total <= 0 then
    redis.call('HDEL', key, 't', 'o')
  else
    redis.call('HSET', key, 'o', nextFirst)
  end
end

if ARGV[3] == '3' then
  for i = 1, n do
    local base = W * (i - 1)
    local windowMs = tonumber(ARGV[7 + base])
    local units = tonumber(ARGV[11 + base])
    if windowMs > 0 then
      giveBack(KEYS[i], math.floor(tonumber(ARGV[8 + base]) / (windowMs / buckets)), units)
    elseif units > 0 and tonumber(redis.call('GET', KEYS[i]) or '0') >= units then
      redis.call('DECRBY', KEYS[i], units)
    end
  end
  return { 1, now, storeNow }
end

local used = {}
local resetAt = {}
local retryAt = {}
local limits = {}
local current = {}
local firsts = {}
local shadowOver = {}
local charged = {}
local allowed = 1

for i = 1, n do
  local key = KEYS[i]
  local base = W * (i - 1)
  local limit = tonumber(ARGV[6 + base])
  local windowMs = tonumber(ARGV[7 + base])
  local overrideIndex = tonumber(ARGV[9 + base])
  local shadow = ARGV[10 + base] == '1'
  if overrideIndex > 0 then
    local q = redis.call('HGET', KEYS[overrideIndex], 'quota')
    if q then limit = tonumber(q) end
  end
  limits[i] = limit
  retryAt[i] = 0
  charged[i] = 0
  local over = false

  if windowMs == 0 then
    local endMs = tonumber(ARGV[8 + base])
    local sum = tonumber(redis.call('GET', key) or '0')
    used[i] = sum
    resetAt[i] = endMs
    if sum + cost > limit then
      over = true
      retryAt[i] = endMs
    end
  else
    local bucketMs = windowMs / buckets
    local cur = math.floor(now / bucketMs)
    local oldest = math.floor((now - windowMs) / bucketMs)
    current[i] = cur

    local head = redis.call('HMGET', key, 't', 'o')
    local first = tonumber(head[2])
    local sum = first and tonumber(head[1]) or 0
    if first ~= nil and first < oldest then
      sum, first = expire(key, sum, first, oldest, cur, buckets, peek)
    end
    firsts[i] = first

    used[i] = sum
    if first ~= nil then
      resetAt[i] = (first + 1) * bucketMs + windowMs
    else
      resetAt[i] = 0
    end

    if sum + cost > limit then
      over = true
      -- When enough of the oldest buckets have left for this call to fit. Only a window over
      -- its limit needs the buckets in order, so only it pays for the sort.
      local live = {}
      local flat = redis.call('HGETALL', key)
      for j = 1, #flat, 2 do
        local b = tonumber(flat[j])
        if b ~= nil and b >= oldest then live[#live + 1] = { b, tonumber(flat[j + 1]) } end
      end
      table.sort(live, function(x, y) return x[1] < y[1] end)
      local freed = 0
      local at = now + windowMs
      for j = 1, #live do
        freed = freed + live[j][2]
        if sum - freed + cost <= limit then
          at = (live[j][1] + 1) * bucketMs + windowMs
          break
        end
      end
      retryAt[i] = at
    end
  end
  if over then
    if shadow then shadowOver[i] = true else allowed = 0 end
  end
end

-- Charge every window, or none (a refused call is not counted). A dry-run rule that is over
-- is not charged: it never admitted the call.
if allowed == 1 and not peek then
  for i = 1, n do
    if not shadowOver[i] then
      local base = W * (i - 1)
      local windowMs = tonumber(ARGV[7 + base])
      local ask = tonumber(ARGV[11 + base])
      local c = cost
      -- A lease keeps the window at or under half its limit: past that, every call is checked
      -- here, one by one, so an unused share never stands in the way of a call near the limit.
      if ask > cost and windowMs > 0 and used[i] + ask <= math.floor(limits[i] / 2) then
        c = ask
      end
      charged[i] = c
      if windowMs == 0 then
        redis.call('INCRBY', KEYS[i], cost)
        -- Kept one day past the month's end, so the last month stays readable for a while.
        redis.call('PEXPIREAT', KEYS[i], tonumber(ARGV[8 + base]) + 86400000)
      else
        local bucketMs = windowMs / buckets
        redis.call('HINCRBY', KEYS[i], current[i], c)
        if firsts[i] == nil then
          redis.call('HSET', KEYS[i], 't', c, 'o', current[i])
        else
          redis.call('HINCRBY', KEYS[i], 't', c)
        end
        redis.call('PEXPIRE', KEYS[i], windowMs + 2 * bucketMs)
        if resetAt[i] == 0 then
          resetAt[i] = (current[i] + 1) * bucketMs + windowMs
        end
      end
      used[i] = used[i] + c
    end
  end
end

local out = { allowed, now, storeNow }
for i = 1, n do
  out[#out + 1] = used[i]
  out[#out + 1] = resetAt[i]
  out[#out + 1] = retryAt[i]
  out[#out + 1] = limits[i]
  out[#out + 1] = charged[i]
end
return out
