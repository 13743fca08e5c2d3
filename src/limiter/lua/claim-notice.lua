-- SPEC §5 notices: who says a team's month reached a threshold, once across every instance.
-- The first claimant's token is kept; asking again with the same token (a claim that timed out
-- but landed) is still a win, so a notice is never lost to a late answer.
--
-- KEYS[1]  the notice key   ARGV[1]  the claimant's token   ARGV[2]  keep until (ms)
--
-- Returns 1 for the claimant, 0 for anyone else.

local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', tonumber(ARGV[2]))
  return 1
end
if v == ARGV[1] then return 1 end
return 0
