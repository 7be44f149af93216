-- True for exactly one caller per (run, hook, finish). ARGV from A: run, hook, finish.
local run = ARGV[A]
if redis.call('EXISTS', run_key(run)) == 0 then return 0 end
return redis.call('SADD', P .. 'hook:' .. run, ARGV[A + 2] .. ':' .. ARGV[A + 1])
