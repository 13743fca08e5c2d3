-- SPEC §8 upgrade report: one entry's calls of a day added, once per batch (batch/recorder.ts):
-- its total, its busiest keys (the day's top KEYS_PER_DAY kept) and when it was last seen. A
-- batch that timed out but landed is written again with the same number and changes nothing.
--
-- KEYS[1]  the day's count (a hash: `n`, and `s:<process>` the last batch applied)
-- KEYS[2]  the day's keys (a sorted set)   KEYS[3]  when last seen (a sorted set, member `last`)
-- ARGV[1]  the writing process  ARGV[2]  the batch's number  ARGV[3]  calls  ARGV[4]  last seen
-- ARGV[5]  keep for (ms)        ARGV[6]  keys kept per day
-- then pairs: a key, its calls
--
-- Returns 1 when the batch was applied, 0 when this key had seen it.

if not firstTime(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
local ttl = tonumber(ARGV[5])
redis.call('HINCRBY', KEYS[1], 'n', tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ttl)
for i = 7, #ARGV, 2 do redis.call('ZINCRBY', KEYS[2], tonumber(ARGV[i + 1]), ARGV[i]) end
-- The day's busiest keys stay; the tail goes, so memory does not grow with the clients.
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[6]) + 1))
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('ZADD', KEYS[3], 'GT', tonumber(ARGV[4]), 'last')
redis.call('PEXPIRE', KEYS[3], ttl)
return 1
