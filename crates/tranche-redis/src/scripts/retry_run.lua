-- Revive a run's failed jobs with fresh attempts, and the chain steps cancelled because
-- of them. ARGV[A]: the run. Returns how many jobs were revived.
local run = ARGV[A]
if redis.call('EXISTS', rk(run)) == 0 then return 0 end
local by_id = function(a, b) return tonumber(a) < tonumber(b) end
local failed = redis.call('ZRANGE', P .. 'fail:' .. run, 0, -1)
load(failed)
local n = 0
for _, id in ipairs(failed) do
  local st, _, _, cr, sa, _, pr, ne, uf, nx, gr, _, q, tx = job(id)
  if st == FAILED then
    put(id, encode(AVAILABLE, 0, NOW, cr, sa, 0, pr, ne, uf, nx, gr, run, q, tx))
    revived(id)
    moved(id, run, FAILED, AVAILABLE)
    make_available(id, q, pr, NOW)
    n = n + 1
    -- A group whose callback has not been released yet waits for this member again;
    -- one whose callback already ran keeps its single firing.
    if gr ~= '' then
      local g = P .. 'g:' .. gr
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
  local st, att, av, cr, sa, _, pr, ne, _, nx, gr, _, q, tx = job(id)
  if st == CANCELLED then
    put(id, encode(PENDING, att, av, cr, sa, 0, pr, ne, 0, nx, gr, run, q,
      with_text(tx, 4, nil)))
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
