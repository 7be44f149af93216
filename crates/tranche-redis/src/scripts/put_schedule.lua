-- Declare a schedule. ARGV from A: name, timing, spec, through (µs). A new one, or a
-- changed timing, starts from `through` with no last fire; the same timing keeps both
-- and replaces only the spec. Returns 1 when `through` was set.
local name = ARGV[A]
local k = P .. 'sch:' .. name
redis.call('SADD', P .. 'schs', name)
if redis.call('HGET', k, 'timing') == ARGV[A + 1] then
  redis.call('HSET', k, 'spec', ARGV[A + 2])
  return 0
end
redis.call('DEL', k)
redis.call('HSET', k, 'timing', ARGV[A + 1], 'spec', ARGV[A + 2], 'through', ARGV[A + 3])
return 1
