-- SPEC §5: calls no check counted (monthly quotas off, or admitted while the store did not
-- answer) added to a team's ledger late: its month and its days together, once per batch. A
-- batch that timed out but landed is written again with the same number and changes nothing
-- (batch/recorder.ts).
--
-- KEYS[1]  the ledger
-- ARGV[1]  the writing process  ARGV[2]  the batch's number  ARGV[3]  keep until (ms)
-- then pairs: a day field (`d<DD>`), its calls; or a call in doubt (`d<DD>|<store id>|<n>`,
-- 1): its check was written and never answered, so it is added only if that check did not
-- charge it (check.lua's ring beside the ledger does not hold its tag).
--
-- Returns 1 when the batch was applied, 0 when this key had seen it.

local RING = 512
local seen = 's:' .. ARGV[1]
if tonumber(redis.call('HGET', KEYS[1], seen) or '0') >= tonumber(ARGV[2]) then return 0 end
local total = 0
for i = 4, #ARGV, 2 do
  local field = ARGV[i]
  local n = tonumber(ARGV[i + 1])
  local day, id, seq = string.match(field, '^([^|]+)|([^|]+)|(%d+)$')
  if seq ~= nil then
    seq = tonumber(seq)
    local at = (seq % RING) * 4
    local got = redis.call('GETRANGE', KEYS[1] .. ':k:' .. id, at, at + 3)
    if #got == 4 and struct.unpack('>I4', got) == seq then n = 0 end
    field = day
  end
  if n > 0 then redis.call('HINCRBY', KEYS[1], field, n) end
  total = total + n
end
redis.call('HINCRBY', KEYS[1], 'used', total)
redis.call('HSET', KEYS[1], seen, ARGV[2])
redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[3]))
return 1
