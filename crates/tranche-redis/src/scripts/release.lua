-- Hand running jobs back without counting the attempt. ARGV from A, 2 per lease:
-- job, attempt. Returns how many were released.
local released = 0
local i = A
while i <= #ARGV do
  local id, attempt = ARGV[i], tonumber(ARGV[i + 1])
  local state, job_attempt, _, created_at, started_at, finished_at, priority, has_errors,
    upstream_failed, next_step, group, run, queue, texts = job(id)
  if state == RUNNING and job_attempt == attempt then
    unlease(id, queue)
    put(id, encode(AVAILABLE, job_attempt - 1, NOW, created_at, started_at, finished_at,
      priority, has_errors, upstream_failed, next_step, group, run, queue, texts))
    moved(id, run, RUNNING, AVAILABLE)
    make_available(id, queue, priority, NOW)
    released = released + 1
  end
  i = i + 2
end
finish()
return released
