-- Check-and-charge for every window of one request, all or nothing (SPEC §3, §5).
--
-- Sliding windows (windowMs > 0): the key is a hash of buckets, field = bucket index
-- (floor(ms / bucketMs)), value = calls admitted in it. bucketMs = windowMs / 50, so a call is
-- counted until the end of its bucket plus one window: never early, at most 1/50 of the
-- window late. A key holds at most 51 live buckets whatever the limit, and expires when idle.
--
-- Calendar windows (windowMs = 0, the monthly quota): the key is a plain counter for one
-- month; it admits until `limit` and resets at endMs. Its limit may be overridden by the
-- `quota` field of another key (a team changed through the admin API), read here so that a
-- raised quota applies on every instance from the next request.
--
-- KEYS[1..n]          the windows' keys; KEYS[n+1..] limit-override keys
-- ARGV[1]             now in ms (the caller's clock)
-- ARGV[2]             cost of this call (1)
-- ARGV[3]             mode: 0 = check and charge; 1 = peek (read only, charge and delete
--                     nothing); 2 = force (charge without checking: a refund, with cost -1,
--                     of a call charged here and refused on another Cluster slot)
-- ARGV[4 + 4(i-1)]    window i: limit
-- ARGV[5 + 4(i-1)]    window i: length in ms, or 0 for a calendar window
-- ARGV[6 + 4(i-1)]    window i: calendar window end (ms), else 0
-- ARGV[7 + 4(i-1)]    window i: index in KEYS of its limit-override key, else 0
--
-- Returns { allowed, used_1, resetAt_1, retryAt_1, limit_1, used_2, ... }: used includes this
-- call when admitted; resetAt is when the oldest counted call leaves (calendar: the end);
-- retryAt (refusing windows only, else 0) is when a call would fit again; limit is the
-- limit applied.

local now = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local peek = ARGV[3] == '1'
local force = ARGV[3] == '2'
local n = (#ARGV - 3) / 4

local used = {}
local resetAt = {}
local retryAt = {}
local limits = {}
local current = {}
local allowed = 1

for i = 1, n do
  local key = KEYS[i]
  local base = 4 * (i - 1)
  local limit = tonumber(ARGV[4 + base])
  local windowMs = tonumber(ARGV[5 + base])
  local overrideIndex = tonumber(ARGV[7 + base])
  if overrideIndex > 0 then
    local q = redis.call('HGET', KEYS[overrideIndex], 'quota')
    if q then limit = tonumber(q) end
  end
  limits[i] = limit
  retryAt[i] = 0

  if windowMs == 0 then
    local endMs = tonumber(ARGV[6 + base])
    local sum = tonumber(redis.call('GET', key) or '0')
    used[i] = sum
    resetAt[i] = endMs
    if sum + cost > limit and not force then
      allowed = 0
      retryAt[i] = endMs
    end
  else
    local bucketMs = windowMs / 50
    local cur = math.floor(now / bucketMs)
    local oldest = math.floor((now - windowMs) / bucketMs)
    current[i] = cur

    -- Read the live buckets; drop the ones that left the window.
    local flat = redis.call('HGETALL', key)
    local stale = {}
    local sum = 0
    local first = nil
    for j = 1, #flat, 2 do
      local b = tonumber(flat[j])
      if b < oldest then
        stale[#stale + 1] = flat[j]
      else
        sum = sum + tonumber(flat[j + 1])
        if first == nil or b < first then first = b end
      end
    end
    if #stale > 0 and not peek then
      redis.call('HDEL', key, unpack(stale))
    end

    used[i] = sum
    if first ~= nil then
      resetAt[i] = (first + 1) * bucketMs + windowMs
    else
      resetAt[i] = 0
    end

    if sum + cost > limit and not force then
      allowed = 0
      -- When enough of the oldest buckets have left for this call to fit. Only a refusal
      -- needs the buckets in order, so only a refusal pays for the sort.
      local live = {}
      for j = 1, #flat, 2 do
        local b = tonumber(flat[j])
        if b >= oldest then live[#live + 1] = { b, tonumber(flat[j + 1]) } end
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
end

-- Charge every window, or none (a refused call is not counted).
if allowed == 1 and not peek then
  for i = 1, n do
    local base = 4 * (i - 1)
    local windowMs = tonumber(ARGV[5 + base])
    if windowMs == 0 then
      redis.call('INCRBY', KEYS[i], cost)
      -- Kept one day past the month's end, so the last month stays readable for a while.
      redis.call('PEXPIREAT', KEYS[i], tonumber(ARGV[6 + base]) + 86400000)
    else
      local bucketMs = windowMs / 50
      redis.call('HINCRBY', KEYS[i], current[i], cost)
      redis.call('PEXPIRE', KEYS[i], windowMs + 2 * bucketMs)
      if resetAt[i] == 0 then
        resetAt[i] = (current[i] + 1) * bucketMs + windowMs
      end
    end
    used[i] = used[i] + cost
  end
end

local out = { allowed }
for i = 1, n do
  out[#out + 1] = used[i]
  out[#out + 1] = resetAt[i]
  out[#out + 1] = retryAt[i]
  out[#out + 1] = limits[i]
end
return out
