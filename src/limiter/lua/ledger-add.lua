-- SPEC §5: calls no check counted (monthly quotas off, or admitted while the store did not
-- answer) added to a team's ledger late: its month and its days together, once per batch. A
-- batch that timed out but landed is written again with the same number and changes nothing
-- (batch/recorder.ts).
--
-- KEYS[1]  the ledger
-- ARGV[1]  the writing process  ARGV[2]  the batch's number  ARGV[3]  keep until (ms)
-- then pairs: a day field (`d<DD>`), its calls
--
-- Returns 1 when the batch was applied, 0 when this key had seen it.

local seen = 's:' .. ARGV[1]
if tonumber(redis.call('HGET', KEYS[1], seen) or '0') >= tonumber(ARGV[2]) then return 0 end
local total = 0
for i = 4, #ARGV, 2 do
  local n = tonumber(ARGV[i + 1])
  redis.call('HINCRBY', KEYS[1], ARGV[i], n)
  total = total + n
end
redis.call('HINCRBY', KEYS[1], 'used', total)
redis.call('HSET', KEYS[1], seen, ARGV[2])
redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[3]))
return 1
