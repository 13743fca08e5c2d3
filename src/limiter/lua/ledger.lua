-- A team's month (SPEC §5 "One ledger"), for every script that writes one (check, give-back,
-- credit, ledger-add; limiter/memory-store.ts keeps the same rules in TypeScript). The ledger
-- is a hash: `used` the month's count, `d<DD>` its calls per day, `c<DD>` credited per day,
-- `q` the quota in force at the last charge, `s:<writer>` the late batches applied. Its
-- invariant, kept here and nowhere else: used = Σ days − Σ credits.

-- `n` calls (negative: given back) on the day field `day` and on the month, together.
local function addToMonth(ledger, day, n)
  redis.call('HINCRBY', ledger, 'used', n)
  redis.call('HINCRBY', ledger, day, n)
end

-- A credit: the month lowered and its day's credits (`c<DD>`) raised by as much.
local function creditMonth(ledger, creditDay, n)
  redis.call('HINCRBY', ledger, 'used', -n)
  redis.call('HINCRBY', ledger, creditDay, n)
end

-- SPEC §5, exactly once: each charging check is tagged (its process's store id and a number)
-- and noted in that process's ring beside the ledger (keys.ts `ledgerRing`: same slot, RING
-- slots of four bytes, kept RING_MS after the last), so a call owed by a process whose check
-- went unanswered is written late (ledger-add) only if that check did not charge it.
local RING = 512
local RING_MS = 3600000

local function noteCheck(ring, seq)
  redis.call('SETRANGE', ring, (seq % RING) * 4, struct.pack('>I4', seq))
  redis.call('PEXPIRE', ring, RING_MS)
end

local function checkNoted(ring, seq)
  local at = (seq % RING) * 4
  local got = redis.call('GETRANGE', ring, at, at + 3)
  return #got == 4 and struct.unpack('>I4', got) == seq
end

