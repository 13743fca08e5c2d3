-- SPEC §12, the commonest check answered first: one sliding window charged one call (no
-- month, no dry-run rule, no lease, not a peek), sent in the short form, under its limit, its
-- key new or every counted bucket still in the window. One read and one write, before the
-- script makes anything else: the functions of the prelude, the ledger and the general path
-- (Lua makes each of them on every run) and the eight arguments the long form spells out.
-- Anything else goes on to the general path (check.lua) with the read made here (`head1`).
--
-- The short form: KEYS[1] the window's key; ARGV[1] buckets, ARGV[2] limit, ARGV[3] deadline
-- (where the long form has it), ARGV[4] windowMs. Its answer here is short too:
-- { 1, storeNow, used, resetAt } (the limit is the caller's, nothing to retry, one charged).
local short = #ARGV == 4
local head1 = nil
if short then
  local deadline = tonumber(ARGV[3])
  if deadline > 0 and storeNow > deadline then return { -1, storeNow, storeNow } end
  local limit = tonumber(ARGV[2])
  local windowMs = tonumber(ARGV[4])
  local bucketMs = windowMs / tonumber(ARGV[1])
  local cur = math.floor(storeNow / bucketMs)
  local curField = string.format('%d', cur)
  head1 = redis.call('HMGET', KEYS[1], 't', 'o', curField)
  local first = tonumber(head1[2])
  -- As chargeBucket (check.lua) writes: the bucket and the total, the oldest bucket when the
  -- key is new, the idle expiry when the bucket opens.
  if first == nil then
    if limit >= 1 then
      redis.call('HSET', KEYS[1], curField, '1', 't', '1', 'o', curField)
      redis.call('PEXPIRE', KEYS[1], string.format('%d', windowMs + 2 * bucketMs))
      return { 1, storeNow, 1, (cur + 1) * bucketMs + windowMs }
    end
  else
    local sum = tonumber(head1[1]) or 0
    if first >= math.floor((storeNow - windowMs) / bucketMs) and sum + 1 <= limit then
      local held = tonumber(head1[3] or '0')
      redis.call('HSET', KEYS[1], curField, string.format('%d', held + 1), 't',
        string.format('%d', sum + 1))
      if held == 0 then
        redis.call('PEXPIRE', KEYS[1], string.format('%d', windowMs + 2 * bucketMs))
      end
      return { 1, storeNow, sum + 1, (first + 1) * bucketMs + windowMs }
    end
  end
end
