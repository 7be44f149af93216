-- Declare or replace a limit. ARGV from A: scope ('q:<queue>' or 'k:<kind>'), the limit
-- packed as 'count|per_us|running'. Returns 1 if the scope had no limit before.
local scope, packed = ARGV[A], ARGV[A + 1]
local existed = redis.call('HEXISTS', P .. 'lim', scope) == 1
redis.call('HSET', P .. 'lim', scope, packed)
if not limit_parse(packed) then
  redis.call('DEL', P .. 'lw:' .. scope)
  redis.call('HDEL', P .. 'lsum', scope)
end
local kind = string.match(scope, '^k:(.*)$')
if kind then
  if not existed then redis.call('HINCRBY', P .. 'lim', '#k', 1) end
  -- Its jobs running now count: from here on unlease and reserve keep the count.
  local ids = redis.call('ZRANGE', P .. 'leased', 0, -1)
  load(ids)
  local n = 0
  for _, id in ipairs(ids) do
    local state = job(id)
    if state == RUNNING and spec_kind(unpack_texts(select(14, job(id)))) == kind then
      n = n + 1
    end
  end
  redis.call('HSET', P .. 'krun', kind, n)
  -- Jobs of the kind may wait in any queue.
  redis.call('PUBLISH', P .. 'wake', '*')
else
  wake(string.sub(scope, 3))
end
finish()
if existed then return 0 end
return 1
