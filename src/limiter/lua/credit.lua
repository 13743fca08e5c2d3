-- SPEC §5 credit: a team's month lowered by up to ARGV calls (never below zero), kept as an
-- entry, in one call: the ledger's `used` and its day's `c<DD>` together (used = days - credits
-- stays exact), the entry appended to the month's credits, and the notices whose threshold
-- `used` falls back under re-armed for the month.
--
-- KEYS[1]  the ledger           KEYS[2]  the credits list
-- KEYS[3]  the 80 % notice key  KEYS[4]  the 100 % notice key
-- ARGV[1]  calls asked          ARGV[2]  the day field (`c<DD>`) the credit counts on
-- ARGV[3]  the quota in force   ARGV[4]  when (ms)   ARGV[5]  the note ('' for none)
-- ARGV[6]  keep until (ms)
--
-- Returns { before, after }.

local asked = tonumber(ARGV[1])
local quota = tonumber(ARGV[3])
local before = tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
local calls = math.min(before, asked)
local after = before - calls
if calls > 0 then
  creditMonth(KEYS[1], ARGV[2], calls)
  redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[6]))
end
local entry = { at = tonumber(ARGV[4]), calls = calls, asked = asked, before = before, after = after }
if ARGV[5] ~= '' then entry.note = ARGV[5] end
redis.call('RPUSH', KEYS[2], cjson.encode(entry))
redis.call('PEXPIREAT', KEYS[2], tonumber(ARGV[6]))
if after * 5 < quota * 4 then redis.call('DEL', KEYS[3]) end
if after < quota then redis.call('DEL', KEYS[4]) end
return { before, after }
