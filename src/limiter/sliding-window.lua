-- Sliding-window check-and-charge for every window of one request, all or nothing (SPEC §3).
--
-- Each window key is a hash of buckets: field = bucket index (floor(ms / bucketMs)),
-- value = calls admitted in it. bucketMs = windowMs / 50, so a call is counted until the end
-- of its bucket plus one window: never early, at most 1/50 of the window late. A key holds
-- at most 51 live buckets whatever the limit, and expires when idle.
--
-- KEYS[i]            the i-th window's hash
-- ARGV[1]            now in ms (the caller's clock)
-- ARGV[2]            cost of this call (1)
-- ARGV[3 + 2(i-1)]   the i-th window's limit
-- ARGV[4 + 2(i-1)]   the i-th window's length in ms
--
-- Returns { allowed, used_1, resetAt_1, retryAt_1, used_2, ... }: used includes this call
-- when admitted; resetAt is when the oldest counted call leaves; retryAt (refused windows
-- only, else 0) is when a call would fit again.

local now = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local n = #KEYS

local used = {}
local resetAt = {}
local retryAt = {}
local current = {}
local expireMs = {}
local allowed = 1

for i = 1, n do
  local key = KEYS[i]
  local limit = tonumber(ARGV[1 + 2 * i])
  local windowMs = tonumber(ARGV[2 + 2 * i])
  local bucketMs = windowMs / 50
  local cur = math.floor(now / bucketMs)
  local oldest = math.floor((now - windowMs) / bucketMs)

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
  if #stale > 0 then
    redis.call('HDEL', key, unpack(stale))
  end

  current[i] = cur
  expireMs[i] = windowMs + 2 * bucketMs
  used[i] = sum
  if first ~= nil then
    resetAt[i] = (first + 1) * bucketMs + windowMs
  else
    resetAt[i] = 0
  end
  retryAt[i] = 0

  if sum + cost > limit then
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

-- Charge every window, or none (a refused call is not counted).
if allowed == 1 then
  for i = 1, n do
    redis.call('HINCRBY', KEYS[i], current[i], cost)
    redis.call('PEXPIRE', KEYS[i], expireMs[i])
    used[i] = used[i] + cost
    if resetAt[i] == 0 then
      resetAt[i] = (current[i] + 1) * (tonumber(ARGV[2 + 2 * i]) / 50) + tonumber(ARGV[2 + 2 * i])
    end
  end
end

local out = { allowed }
for i = 1, n do
  out[#out + 1] = used[i]
  out[#out + 1] = resetAt[i]
  out[#out + 1] = retryAt[i]
end
return out
