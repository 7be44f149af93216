-- Cancel jobs that have not ended. ARGV from A: target kind (job, chain, run), then
-- the job id or run name, then the reason. Cancelling a job cancels the chain steps
-- after it (they can never run); `chain` does so even when the named job has ended.
-- A run's jobs are cancelled as they are, without cascading. Returns how many jobs
-- were cancelled.
local target, what, reason = ARGV[A], ARGV[A + 1], ARGV[A + 2]
if target == 'run' then
  -- Every job the run ever had, by its id ranges in id order; ended ones (or expired)
  -- are skipped. Read a bucket at a time.
  local ranges = {}
  for i, r in ipairs(redis.call('LRANGE', P .. 'ids:' .. what, 0, -1)) do
    local first, last = string.match(r, '^(%d+)-(%d+)$')
    ranges[i] = { tonumber(first), tonumber(last) }
  end
  table.sort(ranges, function(a, b) return a[1] < b[1] end)
  for _, range in ipairs(ranges) do
    local n = range[1]
    while n <= range[2] do
      local ids = {}
      local stop = math.min(range[2], n + 999)
      for m = n, stop do ids[#ids + 1] = S(m) end
      load(ids)
      for _, id in ipairs(ids) do
        local state = job(id)
        if state and state < SUCCEEDED then cancel_one(id, reason, false) end
      end
      -- The records are written as we go so that a large run does not hold them all.
      flush_jobs()
      records = {}
      n = stop + 1
    end
  end
else
  local state = job(what)
  if state and state < SUCCEEDED then
    local next_step, group = cancel_one(what, reason, false)
    job_ended(what, next_step, group, false)
  elseif state and target == 'chain' then
    local _, _, _, _, _, _, _, _, _, next_step = job(what)
    if next_step ~= '' then cancel_successors(next_step, reason, false) end
  end
end
finish()
return cancelled_count
