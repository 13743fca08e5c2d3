-- Once per batch, for every script that writes a recorder's batch (usage-add, report-add,
-- shape-add, ledger-add; limiter/once.ts is the memory stores' twin). A writer's batches come
-- in its own order (batch/recorder.ts), so a key whose `s:<writer>` is at or past a batch's
-- number has had that batch applied whole: a batch that timed out but landed, written again
-- with the same number, changes nothing. True, and marked, the first time; false after.

local function firstTime(key, writer, batch)
  local seen = 's:' .. writer
  if tonumber(redis.call('HGET', key, seen) or '0') >= tonumber(batch) then return false end
  redis.call('HSET', key, seen, batch)
  return true
end

