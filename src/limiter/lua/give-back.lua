-- Gives back calls charged earlier, with no check: the unused part of a lease, a call refused on
-- a later Cluster slot, a call the server protection shed or the server failed (SPEC §9). Each
-- window's calls leave the bucket they were charged in, and only if that bucket still holds
-- them (one that left the window took its calls with it), so a window never goes below zero;
-- a calendar counter gives back only what it holds.
--
-- KEYS[1..n]              the windows' keys
-- ARGV[1]  buckets        buckets per sliding window (BUCKETS_PER_WINDOW in types.ts)
-- then four per window i (from ARGV[2 + 4(i-1)]):
--   windowMs (0 for a calendar window), chargedAtMs (the charge's time on the decision's
--   clock), units (the calls to give back), day (a calendar window: the ledger's day field the
--   call was counted in, `d<DD>`; else '')
--
-- Returns { storeNow }.

local buckets = tonumber(ARGV[1])
local FIRST = 2
local PER_WINDOW = 4
local n = (#ARGV - FIRST + 1) / PER_WINDOW

-- Takes `units` calls back from bucket `bucket` of a sliding window, only if it holds them.
local function fromBucket(key, bucket, units)
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

for i = 1, n do
  local at = FIRST + PER_WINDOW * (i - 1)
  local windowMs = tonumber(ARGV[at])
  local chargedAtMs = tonumber(ARGV[at + 1])
  local units = tonumber(ARGV[at + 2])
  local day = ARGV[at + 3]
  if windowMs > 0 then
    fromBucket(KEYS[i], math.floor(chargedAtMs / (windowMs / buckets)), units)
  elseif units > 0 and tonumber(redis.call('HGET', KEYS[i], day) or '0') >= units
    and tonumber(redis.call('HGET', KEYS[i], 'used') or '0') >= units then
    addToMonth(KEYS[i], day, -units)
  end
end
return { storeNow }
