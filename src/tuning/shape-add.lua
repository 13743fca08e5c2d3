-- SPEC §11 tuning evidence: one key-day's calls added per 5-second bin, once per batch (a
-- batch that timed out but landed is written again with the same number and changes nothing).
-- The same encoding and the same coarsening as src/tuning/shape.ts (read that file first):
-- an hour is a field `hHH`, [level, kind, varints…]; kind 0 dense counts, 1 sparse
-- (gap, count); the smaller is kept; past CAP bytes the hour goes to the next coarser level.
-- A write appends its (bin, calls) pairs to the hour's log `aHH` and folds the log into `hHH`
-- only once it passes LOG_CAP bytes: most writes touch a bin or two, and a fold decodes and
-- encodes the whole hour. A reader folds what is left the same way (shape-store.ts).
--
-- Many key-days per call (a flush writes thousands: one call each cost more in the gateway and
-- in Redis than the counting itself); on Redis Cluster the caller groups them by slot.
--
-- KEYS[k]  a key-day (a hash: `t` calls, `r` refused by a rate limit, `m` by the month,
--          `hHH` the hours, `aHH` their logs, `s:<process>` the last batch applied)
-- ARGV[1]  the writing process  ARGV[2]  the batch's number
-- then per key-day, in KEYS order: keep until (ms), calls, refused (rate), refused (monthly),
-- the number of hours, then per hour: the hour, the number of bins n, then n pairs (5-second
-- bin of the hour, calls)
--
-- Returns how many key-days the batch was applied to (a key that had seen it is skipped).

local FACTORS = {1, 3, 12, 60, 720}
local BINS = 720
local CAP = 2048
local LOG_CAP = 512


local function varint(out, n)
  while n >= 128 do
    out[#out + 1] = (n % 128) + 128
    n = math.floor(n / 128)
  end
  out[#out + 1] = n
end

local function bytes(t)
  local parts = {}
  for i = 1, #t, 4000 do
    parts[#parts + 1] = string.char(unpack(t, i, math.min(i + 3999, #t)))
  end
  return table.concat(parts)
end

-- The smaller encoding of counts (1-based, BINS / FACTORS[level + 1] of them).
local function encode(level, counts)
  local dense = {level, 0}
  local sparse = {level, 1}
  local last = 0
  for i = 1, #counts do
    local n = counts[i]
    varint(dense, n)
    if n > 0 then
      varint(sparse, i - last)
      varint(sparse, n)
      last = i
    end
  end
  if #sparse < #dense then return bytes(sparse) end
  return bytes(dense)
end

-- A reader of the varints of s from byte `at`: the next one, and whether any are left.
local function varints(s, at)
  local len = #s
  local function nextv()
    local n, mul = 0, 1
    while true do
      local b = string.byte(s, at)
      at = at + 1
      n = n + (b % 128) * mul
      if b < 128 then return n end
      mul = mul * 128
    end
  end
  return nextv, function() return at <= len end
end

local function decode(s)
  local level = string.byte(s, 1)
  local size = BINS / FACTORS[level + 1]
  local counts = {}
  for i = 1, size do counts[i] = 0 end
  local nextv, more = varints(s, 3)
  if string.byte(s, 2) == 0 then
    for i = 1, size do counts[i] = nextv() end
  else
    local i = 0
    while more() do
      i = i + nextv()
      counts[i] = nextv()
    end
  end
  return level, counts
end

local function coarsen(level, counts)
  local k = FACTORS[level + 2] / FACTORS[level + 1]
  local out = {}
  for i = 1, BINS / FACTORS[level + 2] do out[i] = 0 end
  for i = 1, #counts do
    local j = math.floor((i - 1) / k) + 1
    out[j] = out[j] + counts[i]
  end
  return level + 1, out
end

-- Folds an hour's log of (bin, calls) pairs (finest bins) into its counts.
local function fold(key, hour, log)
  local field = string.format('h%02d', hour)
  local kept = redis.call('HGET', key, field)
  local level, counts
  if kept then
    level, counts = decode(kept)
  else
    level = 0
    counts = {}
    for b = 1, BINS do counts[b] = 0 end
  end
  local f = FACTORS[level + 1]
  local nextv, more = varints(log, 1)
  while more() do
    local bin = nextv()
    local n = nextv()
    local j = math.floor(bin / f) + 1
    counts[j] = counts[j] + n
  end
  local enc = encode(level, counts)
  while #enc > CAP and level < #FACTORS - 1 do
    level, counts = coarsen(level, counts)
    enc = encode(level, counts)
  end
  redis.call('HSET', key, field, enc)
end

-- One key-day's part of ARGV from i; returns where the next one starts and whether it applied.
local function addOne(key, i)
  local keepUntil = tonumber(ARGV[i])
  local hours = tonumber(ARGV[i + 4])
  local apply = firstTime(key, ARGV[1], ARGV[2])
  if apply then
    redis.call('HINCRBY', key, 't', tonumber(ARGV[i + 1]))
    if ARGV[i + 2] ~= '0' then redis.call('HINCRBY', key, 'r', tonumber(ARGV[i + 2])) end
    if ARGV[i + 3] ~= '0' then redis.call('HINCRBY', key, 'm', tonumber(ARGV[i + 3])) end
  end
  i = i + 5
  for _ = 1, hours do
    local hour = tonumber(ARGV[i])
    local n = tonumber(ARGV[i + 1])
    if apply then
      local pairs = {}
      for p = 0, n - 1 do
        varint(pairs, tonumber(ARGV[i + 2 + 2 * p]))
        varint(pairs, tonumber(ARGV[i + 3 + 2 * p]))
      end
      local logField = string.format('a%02d', hour)
      local log = (redis.call('HGET', key, logField) or '') .. bytes(pairs)
      if #log > LOG_CAP then
        fold(key, hour, log)
        redis.call('HDEL', key, logField)
      else
        redis.call('HSET', key, logField, log)
      end
    end
    i = i + 2 + 2 * n
  end
  if apply then redis.call('PEXPIREAT', key, keepUntil) end
  return i, apply
end

local applied = 0
local i = 3
for k = 1, #KEYS do
  local ok
  i, ok = addOne(KEYS[k], i)
  if ok then applied = applied + 1 end
end
return applied
