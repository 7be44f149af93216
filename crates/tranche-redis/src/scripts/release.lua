-- Hand running jobs back without counting the attempt. ARGV from A, 2 per lease:
-- job, attempt. Returns how many were released.
local released = 0
local i = A
while i <= #ARGV do
  local id, attempt = ARGV[i], tonumber(ARGV[i + 1])
  local k = jk(id)
  local v = redis.call('HMGET', k, 'st', 'att', 'run', 'q', 'pr')
  if tonumber(v[1]) == RUNNING and tonumber(v[2]) == attempt then
    unlease(id, v[4])
    redis.call('HSET', k, 'st', ST[AVAILABLE], 'att', S(attempt - 1), 'av', NOW_S)
    moved(id, v[3], RUNNING, AVAILABLE)
    make_available(id, v[4], v[5] or '0', NOW)
    released = released + 1
  end
  i = i + 2
end
finish()
return released
