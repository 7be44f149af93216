-- Cancel jobs that have not ended. ARGV from A: target kind (job, chain, run), then
-- the job id or run name, then the reason. Cancelling a job cancels the chain steps
-- after it (they can never run); `chain` does so even when the named job has ended.
-- A run's jobs are cancelled as they are, without cascading. Returns how many jobs
-- were cancelled.
local target, what, reason = ARGV[A], ARGV[A + 1], ARGV[A + 2]
if target == 'run' then
  -- Every job the run ever had, by its id ranges in id order; ended ones (or expired)
  -- are skipped.
  local ranges = {}
  for i, r in ipairs(redis.call('LRANGE', P .. 'ids:' .. what, 0, -1)) do
    local first, last = string.match(r, '^(%d+)-(%d+)$')
    ranges[i] = { tonumber(first), tonumber(last) }
  end
  table.sort(ranges, function(a, b) return a[1] < b[1] end)
  for _, r in ipairs(ranges) do
    for n = r[1], r[2] do
      local id = S(n)
      local v = redis.call('HMGET', jk(id), 'st', 'q', 'av')
      local st = tonumber(v[1])
      if st and st < SUCCEEDED then
        cancel_one(id, what, st, v[2], tonumber(v[3]), reason, false)
      end
    end
  end
else
  local v = redis.call('HMGET', jk(what), 'st', 'run', 'nx', 'gr', 'q', 'av')
  if v[1] then
    local st = tonumber(v[1])
    if st < SUCCEEDED then
      cancel_one(what, v[2], st, v[5], tonumber(v[6]), reason, false)
      job_ended(what, v[3], v[4], false)
    elseif target == 'chain' and v[3] then
      cancel_successors(v[3], reason, false)
    end
  end
end
finish()
return cancelled_count
