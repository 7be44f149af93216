-- Pause a queue: reserve.lua leases nothing from a queue in `P paused`. ARGV from A:
-- queue. Returns 1 if it was not paused before, 0 for a repeat (nothing changed).
return redis.call('SADD', P .. 'paused', ARGV[A])
