-- Extend leases to ARGV[A]. ARGV from A + 1, 2 per lease: job, attempt. Returns the
-- indexes (1-based) of the leases no longer held.
local until_at = ARGV[A]
local ids = {}
for i = A + 1, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
load(ids)
local lost = {}
local i, n = A + 1, 1
while i <= #ARGV do
  local id, attempt = ARGV[i], tonumber(ARGV[i + 1])
  local state, job_attempt = job(id)
  if state == RUNNING and job_attempt == attempt then
    lease(id, until_at)
  else
    lost[#lost + 1] = S(n)
  end
  i, n = i + 2, n + 1
end
flush_writes()
return lost
