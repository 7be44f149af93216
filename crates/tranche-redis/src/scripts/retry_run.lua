-- Revive a run's failed jobs with fresh attempts, and the chain steps cancelled because
-- of them. ARGV[A]: the run. Returns how many jobs were revived.
local run = ARGV[A]
if redis.call('EXISTS', rk(run)) == 0 then return 0 end
local by_id = function(a, b) return tonumber(a) < tonumber(b) end
local failed = redis.call('ZRANGE', P .. 'fail:' .. run, 0, -1)
local n = 0
for _, id in ipairs(failed) do
  local k = jk(id)
  local v = redis.call('HMGET', k, 'st', 'q', 'pr', 'gr')
  if tonumber(v[1]) == FAILED then
    redis.call('HSET', k, 'st', ST[AVAILABLE], 'att', '0', 'av', NOW_S)
    redis.call('HDEL', k, 'fi')
    revived(id)
    moved(id, run, FAILED, AVAILABLE)
    make_available(id, v[2], v[3] or '0', NOW)
    n = n + 1
    -- A group whose callback has not been released yet waits for this member again;
    -- one whose callback already ran keeps its single firing.
    if v[4] then
      local g = P .. 'g:' .. v[4]
      local cb = redis.call('HGET', g, 'cb')
      if cb and tonumber(redis.call('HGET', jk(cb), 'st')) == PENDING then
        redis.call('HINCRBY', g, 'left', 1)
      end
    end
  end
end
redis.call('DEL', P .. 'fail:' .. run)
local steps = redis.call('SMEMBERS', P .. 'cfail:' .. run)
table.sort(steps, by_id)
for _, id in ipairs(steps) do
  local k = jk(id)
  if tonumber(redis.call('HGET', k, 'st')) == CANCELLED then
    redis.call('HSET', k, 'st', ST[PENDING], 'uf', '0')
    redis.call('HDEL', k, 'err', 'fi')
    revived(id)
    moved(id, run, CANCELLED, PENDING)
    n = n + 1
  end
end
redis.call('DEL', P .. 'cfail:' .. run)
if not touched[run] then
  touched[run] = true
  touched_list[#touched_list + 1] = run
end
finish()
return n
