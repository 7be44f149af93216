-- Revive a run's failed jobs with fresh attempts, and the chain steps cancelled because
-- of them. ARGV[A]: the run. Returns how many jobs were revived.
local run = ARGV[A]
if redis.call('EXISTS', run_key(run)) == 0 then return 0 end
local by_id = function(a, b) return tonumber(a) < tonumber(b) end
local failed = redis.call('ZRANGE', P .. 'fail:' .. run, 0, -1)
load(failed)
local n = 0
for _, id in ipairs(failed) do
  local state, _, _, created_at, started_at, _, priority, has_errors, upstream_failed,
    next_step, group, _, queue, texts = job(id)
  if state == FAILED then
    put(id, encode(AVAILABLE, 0, NOW, created_at, started_at, 0, priority, has_errors,
      upstream_failed, next_step, group, run, queue, texts))
    revived(id)
    moved(id, run, FAILED, AVAILABLE)
    make_available(id, queue, priority, NOW)
    n = n + 1
    -- A group whose callback has not been released yet waits for this member again;
    -- one whose callback already ran keeps its single firing.
    if group ~= '' then
      local g = P .. 'g:' .. group
      local cb = redis.call('HGET', g, 'cb')
      if cb and job(cb) == PENDING then
        redis.call('HINCRBY', g, 'left', 1)
      end
    end
  end
end
redis.call('DEL', P .. 'fail:' .. run)
local steps = redis.call('SMEMBERS', P .. 'cfail:' .. run)
table.sort(steps, by_id)
load(steps)
for _, id in ipairs(steps) do
  local state, attempt, available_at, created_at, started_at, _, priority, has_errors, _,
    next_step, group, _, queue, texts = job(id)
  if state == CANCELLED then
    put(id, encode(PENDING, attempt, available_at, created_at, started_at, 0, priority,
      has_errors, 0, next_step, group, run, queue, with_text(texts, TEXT_ERROR, nil)))
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
