-- Remove a limit and its window. ARGV from A: scope. Returns 1 if there was one.
local scope = ARGV[A]
if redis.call('HDEL', P .. 'lim', scope) == 0 then return 0 end
redis.call('DEL', P .. 'lw:' .. scope)
redis.call('HDEL', P .. 'lsum', scope)
local kind = string.match(scope, '^k:(.*)$')
if kind then
  -- At 0 the field goes, so that `P lim` exists only while some limit does.
  if redis.call('HINCRBY', P .. 'lim', '#k', -1) <= 0 then
    redis.call('HDEL', P .. 'lim', '#k')
  end
  redis.call('HDEL', P .. 'krun', kind)
  redis.call('PUBLISH', P .. 'wake', '*')
else
  wake(string.sub(scope, 3))
end
finish()
return 1
