-- Check and charge every window of one request, all or nothing (SPEC §3, §5); or, with peek,
-- read them changing nothing.
--
-- The long form (a check of one plain window may come in the short form: check-short.lua,
-- which runs first and answers its commonest case):
-- KEYS[1..n]            the windows' keys; KEYS[n+1..] team quota keys and ledger rings
-- ARGV[1]  buckets      buckets per sliding window (BUCKETS_PER_WINDOW in types.ts)
-- ARGV[2]  peek         1: read only (charge and delete nothing); 0: check and charge
-- ARGV[3]  deadline     a time on the store's clock (ms), or 0: past it the caller has given up
--                       (its timeout), so the call is neither admitted nor charged (issue #11)
-- ARGV[4]  tag          this check's number in its process's rings (SPEC §5), or 0: untagged
-- then eight per window i (from ARGV[5 + 8(i-1)]):
--   limit, windowMs (0 for a calendar window), endMs (a calendar window's end, else 0),
--   quotaIndex (index in KEYS of its team's quota key, else 0), shadow (1: a dry-run rule:
--   never refuses, not charged when over), ask (a lease: the calls to charge now, this one and
--   the share the caller admits by itself until the bucket ends; granted only while the
--   window stays at or under half its limit with it, else the call is charged alone), day (a
--   calendar window: the ledger's field for the call's day, `d<DD>`; else ''), ring (a
--   calendar window of a tagged check: the index in KEYS of its ledger's ring for this
--   process, where the tag is noted when the month is charged; else 0)
--
-- Returns { allowed, now, storeNow, then per window: used, resetAt, retryAt, limit, charged }:
-- allowed is 1, 0, or -1 for a deadline passed; now is the clock the times are on; used
-- includes this call when it was charged; resetAt is when the oldest counted call leaves
-- (calendar: the end); retryAt (windows over their limit only, else 0) is when a call would
-- fit again; limit is the limit applied; charged is what this call added (a lease: its share).

-- A short form check-short.lua did not answer goes on in the long form.
local A = ARGV
if short then A = { ARGV[1], '0', ARGV[3], '0', ARGV[2], ARGV[4], '0', '0', '0', '0', '', '0' } end
local buckets = tonumber(A[1])
local peek = A[2] == '1'
local deadline = tonumber(A[3])
local tag = tonumber(A[4])
local FIRST = 5
local PER_WINDOW = 8
-- SPEC §5: a ledger (and its days) is kept this long past its month's end.
local KEEP_MS = 400 * 86400000
local n = (#A - FIRST + 1) / PER_WINDOW
local now = storeNow

if not peek and deadline > 0 and storeNow > deadline then
  return { -1, now, storeNow }
end

-- Charges `c` calls to a sliding window's bucket (`bucket`, its field): one write of the bucket
-- and the total, with the oldest live bucket (`oldest`, a field) when it is new or moved; and
-- the idle expiry when the bucket opens (`held` 0): it outlives every call of the bucket by a
-- window and a bucket at least, so later calls of the same bucket need not move it.
local function chargeBucket(key, bucket, held, used, c, oldest, windowMs, bucketMs)
  if oldest == nil then
    redis.call('HSET', key, bucket, field(held + c), 't', field(used + c))
  else
    redis.call('HSET', key, bucket, field(held + c), 't', field(used + c), 'o', oldest)
  end
  if held == 0 then redis.call('PEXPIRE', key, field(windowMs + 2 * bucketMs)) end
end

-- Drops the buckets that left the window (index < oldest) from the total; returns the new
-- total and the oldest bucket still holding calls (nil when none). Deletes the buckets that
-- left (not on a peek); the new total and oldest are the caller's to write, with the charge.
local function expire(key, sum, first, oldest, cur)
  local gone = {}
  local nextFirst = nil
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
    if sum > 0 then nextFirst = firstHeld(key, oldest, cur) end
  else
    -- One read: the buckets that left and the first that stays (a steady caller's next).
    local range, got = bucketsIn(key, first, oldest)
    for j = 1, #range - 1 do
      if got[j] then
        gone[#gone + 1] = range[j]
        sum = sum - tonumber(got[j])
      end
    end
    if got[#range] then
      nextFirst = oldest
    elseif sum > 0 then
      nextFirst = firstHeld(key, oldest + 1, cur)
    end
  end
  -- No live bucket left: the total is 0 (it can only disagree if the hash was edited by hand).
  if nextFirst == nil then
    sum = 0
    gone[#gone + 1] = 't'
    gone[#gone + 1] = 'o'
  end
  if not peek and #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
  return sum, nextFirst
end

-- When enough of the oldest live buckets leave for one more call to fit. Only a window over
-- its limit needs its buckets in order, so only it pays for reading and sorting them all.
local function retryTime(key, sum, limit, oldest, bucketMs, windowMs)
  local live = {}
  local flat = redis.call('HGETALL', key)
  for j = 1, #flat, 2 do
    local b = tonumber(flat[j])
    if b ~= nil and b >= oldest then live[#live + 1] = { b, tonumber(flat[j + 1]) } end
  end
  table.sort(live, function(x, y) return x[1] < y[1] end)
  local freed = 0
  for j = 1, #live do
    freed = freed + live[j][2]
    if sum - freed + 1 <= limit then return (live[j][1] + 1) * bucketMs + windowMs end
  end
  return now + windowMs
end

-- Per window: its count, times, limit, current bucket (and what that bucket held), first live
-- bucket, whether a dry-run rule is over, and what this call charged.
local used, resetAt, retryAt, limits, current, held, firsts, shadowOver, charged =
  {}, {}, {}, {}, {}, {}, {}, {}, {}
-- Windows whose oldest bucket moved (some left): their total and oldest are still to write.
local moved = {}
-- A ledger's `q` as it stands (the quota is written only when it changed).
local quotas = {}
local allowed = 1

for i = 1, n do
  local key = KEYS[i]
  local at = FIRST + PER_WINDOW * (i - 1)
  local limit = tonumber(A[at])
  local windowMs = tonumber(A[at + 1])
  local endMs = tonumber(A[at + 2])
  local quotaIndex = tonumber(A[at + 3])
  local shadow = A[at + 4] == '1'
  if quotaIndex > 0 then
    local q = redis.call('HGET', KEYS[quotaIndex], 'quota')
    if q then limit = tonumber(q) end
  end
  limits[i] = limit
  retryAt[i] = 0
  charged[i] = 0
  local over = false

  if windowMs == 0 then
    local got = redis.call('HMGET', key, 'used', 'q')
    local sum = tonumber(got[1] or '0')
    quotas[i] = got[2]
    used[i] = sum
    resetAt[i] = endMs
    if sum + 1 > limit then
      over = true
      retryAt[i] = endMs
    end
  else
    local bucketMs = windowMs / buckets
    local cur = math.floor(now / bucketMs)
    local oldest = math.floor((now - windowMs) / bucketMs)
    current[i] = cur
    -- The total, the oldest live bucket and the current bucket, in one read (SPEC §12: a call
    -- in the steady state reads once and writes once); a short form's was read in check-short.lua.
    local head = (i == 1 and head1) or redis.call('HMGET', key, 't', 'o', field(cur))
    local first = tonumber(head[2])
    local sum = first and tonumber(head[1]) or 0
    held[i] = tonumber(head[3] or '0')
    if first ~= nil and first < oldest then
      sum, first = expire(key, sum, first, oldest, cur)
      moved[i] = first ~= nil
    end
    firsts[i] = first
    -- No live bucket: whatever a hand-edited current bucket holds is not counted.
    if first == nil then held[i] = 0 end
    used[i] = sum
    resetAt[i] = 0
    if first ~= nil then resetAt[i] = (first + 1) * bucketMs + windowMs end
    if sum + 1 > limit then
      over = true
      retryAt[i] = retryTime(key, sum, limit, oldest, bucketMs, windowMs)
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
      local at = FIRST + PER_WINDOW * (i - 1)
      local windowMs = tonumber(A[at + 1])
      local ask = tonumber(A[at + 5])
      local c = 1
      -- A lease keeps the window at or under half its limit: past that, every call is checked
      -- here, one by one, so an unused share never stands in the way of a call near the limit.
      if ask > 1 and windowMs > 0 and used[i] + ask <= math.floor(limits[i] / 2) then c = ask end
      charged[i] = c
      if windowMs == 0 then
        -- SPEC §5 "One ledger": the month and its day together, the check's tag noted, the
        -- quota in force.
        addToMonth(KEYS[i], A[at + 6], 1)
        local ring = tonumber(A[at + 7])
        if ring > 0 then noteCheck(KEYS[ring], tag) end
        -- The quota in force, written when it changed; the expiry set when the month began.
        if tonumber(quotas[i]) ~= limits[i] then redis.call('HSET', KEYS[i], 'q', limits[i]) end
        if used[i] == 0 then redis.call('PEXPIREAT', KEYS[i], tonumber(A[at + 2]) + KEEP_MS) end
      else
        local bucketMs = windowMs / buckets
        local bucket = field(current[i])
        -- A new key's oldest bucket is this one; a moved one's is written with the charge.
        local oldest = nil
        if firsts[i] == nil then
          oldest = bucket
        elseif moved[i] then
          oldest = field(firsts[i])
          moved[i] = false
        end
        chargeBucket(KEYS[i], bucket, held[i], used[i], c, oldest, windowMs, bucketMs)
        if resetAt[i] == 0 then resetAt[i] = (current[i] + 1) * bucketMs + windowMs end
      end
      used[i] = used[i] + c
    end
  end
end

-- A window not charged (a refusal, a dry-run rule over) whose buckets left: its new total and
-- oldest, so the next call does not subtract them again.
if not peek then
  for i = 1, n do
    if moved[i] then redis.call('HSET', KEYS[i], 't', field(used[i]), 'o', field(firsts[i])) end
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
