-- Record an effect once: ARGV from A: key, job ('' for none), value. Returns 1 if
-- recorded, 0 if the key was already there (and nothing changed).
local k = P .. 'eff:' .. ARGV[A]
if redis.call('EXISTS', k) == 1 then return 0 end
redis.call('HSET', k, 'job', ARGV[A + 1], 'value', ARGV[A + 2], 'at', NOW_S)
return 1
