-- SPEC §5 usage over time: a base's calls per day of one month added, once per batch. A batch
-- that timed out but landed is written again with the same number and changes nothing
-- (batch/recorder.ts), so no call is counted twice.
--
-- KEYS[1]  the base's month (a hash: a field per day, `s:<process>` the last batch applied)
-- ARGV[1]  the writing process  ARGV[2]  the batch's number  ARGV[3]  keep until (ms)
-- then pairs: a day of the month (`DD`), its calls
--
-- Returns 1 when the batch was applied, 0 when this key had seen it.

if not firstTime(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
for i = 4, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], tonumber(ARGV[i + 1])) end
redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[3]))
return 1
