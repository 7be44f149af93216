-- Revive one failed or cancelled job with fresh attempts, and the cancelled chain
-- steps after it (pending behind it again, as a run retry revives them). ARGV[A]: the
-- job id. Returns { status, n }: 'ok' and how many jobs were revived; 'missing' (no
-- such job, or its run's data expired); 'state' and the job's state (it has not
-- ended, or it succeeded); 'upstream' (cancelled because an earlier step failed).
local id = ARGV[A]
local state, _, _, created_at, started_at, _, priority, has_errors, upstream_failed,
  next_step, group, run, queue, texts = job(id)
if not state or redis.call('EXISTS', run_key(run)) == 0 then return { 'missing', 0 } end
if state ~= FAILED and state ~= CANCELLED then return { 'state', state } end
if state == CANCELLED and upstream_failed == 1 then return { 'upstream', 0 } end
put(id, encode(AVAILABLE, 0, NOW, created_at, started_at, 0, priority, has_errors, 0,
  next_step, group, run, queue, texts))
revived(id)
moved(id, run, state, AVAILABLE)
make_available(id, queue, priority, NOW)
if state == FAILED then redis.call('ZREM', P .. 'fail:' .. run, id) end
-- As in a run retry: a callback not yet released waits for this member again.
if group ~= '' then
  local g = P .. 'g:' .. group
  local cb = redis.call('HGET', g, 'cb')
  if cb and job(cb) == PENDING then redis.call('HINCRBY', g, 'left', 1) end
end
local n = 1
local cursor = next_step
while cursor ~= '' do
  local s, attempt, available_at, created, started, _, prio, errors, _, after, g, r, q,
    t = job(cursor)
  if s ~= CANCELLED then break end
  put(cursor, encode(PENDING, attempt, available_at, created, started, 0, prio, errors, 0,
    after, g, r, q, with_text(t, TEXT_ERROR, nil)))
  revived(cursor)
  moved(cursor, r, CANCELLED, PENDING)
  redis.call('SREM', P .. 'cfail:' .. r, cursor)
  n = n + 1
  cursor = after
end
finish()
return { 'ok', n }
