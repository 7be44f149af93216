-- Claim every key for an owner until ARGV[A + 1], or none of them: every key is
-- checked before any is written. ARGV: A owner, A+1 until, A+2 memory ttl (seconds,
-- only so that forgotten locks do not pile up; expiry itself is judged by `until`
-- against the clock), then keys. Returns {} when claimed, else {key, holder}.
local owner, until_at, ttl = ARGV[A], ARGV[A + 1], ARGV[A + 2]
for i = A + 3, #ARGV do
  local v = redis.call('HMGET', P .. 'lock:' .. ARGV[i], 'owner', 'exp')
  if v[1] and tonumber(v[2]) > NOW and v[1] ~= owner then
    return { ARGV[i], v[1] }
  end
end
for i = A + 3, #ARGV do
  local k = P .. 'lock:' .. ARGV[i]
  redis.call('HSET', k, 'owner', owner, 'exp', until_at)
  redis.call('EXPIRE', k, ttl)
end
return {}
