-- Delete one ended job: its record, its attempt errors, its gate's count if it never
-- opened, and what indexes it (failures, revivable steps, its unique key); its run
-- counts it no more. The later steps of its
-- chain that its failure cancelled can no longer be revived. ARGV[A]: the job id.
-- Returns { status, state }: 'ok'; 'missing' (no such job); 'state' and the job's
-- state when it has not ended.
local id = ARGV[A]
local state, _, _, _, _, _, _, _, upstream_failed, next_step, _, run, _, texts = job(id)
if not state then return { 'missing', 0 } end
if state < SUCCEEDED then return { 'state', state } end
redis.call('HDEL', bucket_key(id), id, gate_field(id))
records[id] = false
redis.call('DEL', errors_key(id))
if state == FAILED then redis.call('ZREM', P .. 'fail:' .. run, id) end
if upstream_failed == 1 then redis.call('SREM', P .. 'cfail:' .. run, id) end
local _, _, _, _, unique_key = unpack_texts(texts)
if unique_key and redis.call('HGET', P .. 'uq:' .. run, unique_key) == id then
  redis.call('HDEL', P .. 'uq:' .. run, unique_key)
end
local cursor = next_step
while cursor ~= '' do
  local s, attempt, available_at, created, started, finished, prio, errors, uf, after, g,
    r, q, t = job(cursor)
  if s ~= CANCELLED or uf ~= 1 then break end
  put(cursor, encode(s, attempt, available_at, created, started, finished, prio, errors, 0,
    after, g, r, q, t))
  redis.call('SREM', P .. 'cfail:' .. r, cursor)
  cursor = after
end
if redis.call('EXISTS', run_key(run)) == 1 then
  count(run, 'total', -1)
  count(run, STATE_NAME[state], -1)
  touch(run)
end
finish()
return { 'ok', state }
