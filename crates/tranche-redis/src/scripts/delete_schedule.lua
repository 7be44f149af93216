-- Remove a schedule. ARGV from A: name. Returns 1 if there was one.
local name = ARGV[A]
redis.call('DEL', P .. 'sch:' .. name)
return redis.call('SREM', P .. 'schs', name)
