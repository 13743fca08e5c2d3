-- SPEC §5: calls no check counted (monthly quotas off, or admitted while the store did not
-- answer) added to a team's ledger late: its month and its days together, once per batch. A
-- batch that timed out but landed is written again with the same number and changes nothing
-- (batch/recorder.ts).
--
-- KEYS[1]  the ledger   KEYS[2..]  rings of checks beside it (keys.ts `ledgerRing`)
-- ARGV[1]  the writing process  ARGV[2]  the batch's number  ARGV[3]  keep until (ms)
-- ARGV[4]  how many day pairs follow
-- then pairs: a day field (`d<DD>`), its calls;
-- then triples, one per call in doubt: a day field, the index in KEYS of the ring of the
-- process whose check went unanswered, the check's tag. Such a call is added only if its check
-- did not charge it (the ring does not hold its tag).
--
-- Returns 1 when the batch was applied, 0 when this key had seen it.

if not firstTime(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
local pairsEnd = 5 + 2 * tonumber(ARGV[4])
for i = 5, pairsEnd - 1, 2 do addToMonth(KEYS[1], ARGV[i], tonumber(ARGV[i + 1])) end
for i = pairsEnd, #ARGV, 3 do
  if not checkNoted(KEYS[tonumber(ARGV[i + 1])], tonumber(ARGV[i + 2])) then
    addToMonth(KEYS[1], ARGV[i], 1)
  end
end
redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[3]))
return 1
