-- Release the keys ARGV[A + 1..] held by owner ARGV[A]; returns how many.
local owner = ARGV[A]
local n = 0
for i = A + 1, #ARGV do
  local k = P .. 'lock:' .. ARGV[i]
  if redis.call('HGET', k, 'owner') == owner then
    redis.call('DEL', k)
    n = n + 1
  end
end
return n
