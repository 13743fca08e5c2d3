-- Reading a sliding window's buckets (the layout is prelude.lua's), for the scripts that walk
-- them: check (its general path) and give-back.

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
