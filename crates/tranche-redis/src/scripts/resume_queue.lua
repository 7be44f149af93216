-- Resume a paused queue and wake the reserves waiting on it, in every process. ARGV
-- from A: queue. Returns 1 if it was paused, 0 for a repeat (nothing changed).
local queue = ARGV[A]
if redis.call('SREM', P .. 'paused', queue) == 0 then return 0 end
wake(queue)
finish()
return 1
