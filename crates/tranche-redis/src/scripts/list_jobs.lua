-- A page of jobs in id order after a cursor, kept by a filter; read only. ARGV from A:
-- after (0: from the start), limit, budget (most jobs examined), run, state, queue,
-- kind ('' for no filter). Where they come from: a run's failures (`P fail:<run>`) for
-- failed jobs of a run, the run's id ranges (`P ids:<run>`) for a run, else every id
-- up to `P seq:job`; jobs whose data expired are passed over. Returns the next cursor
-- ('' after the last page), then per job kept: id, state, attempt, created_at,
-- finished_at, run, queue, packed spec, last error ('' where unset).
local after, limit, budget = tonumber(ARGV[A]), tonumber(ARGV[A + 1]), tonumber(ARGV[A + 2])
local f_run, f_state, f_queue, f_kind = ARGV[A + 3], ARGV[A + 4], ARGV[A + 5], ARGV[A + 6]
local ids, exhausted = {}, true
if f_run ~= '' and f_state ~= '' and tonumber(f_state) == FAILED then
  local found = redis.call('ZRANGEBYSCORE', P .. 'fail:' .. f_run, '(' .. S(after), '+inf',
    'LIMIT', 0, budget)
  for i, id in ipairs(found) do ids[i] = id end
  exhausted = #found < budget
elseif f_run ~= '' then
  local ranges = {}
  for i, r in ipairs(redis.call('LRANGE', P .. 'ids:' .. f_run, 0, -1)) do
    local first, last = string.match(r, '^(%d+)-(%d+)$')
    ranges[i] = { tonumber(first), tonumber(last) }
  end
  table.sort(ranges, function(a, b) return a[1] < b[1] end)
  local full = false
  for _, range in ipairs(ranges) do
    local n = math.max(range[1], after + 1)
    while n <= range[2] do
      if #ids >= budget then
        full = true
        break
      end
      ids[#ids + 1] = S(n)
      n = n + 1
    end
    if full then break end
  end
  exhausted = not full
else
  local top = tonumber(redis.call('GET', P .. 'seq:job') or '0')
  local last = math.min(top, after + budget)
  for n = after + 1, last do ids[#ids + 1] = S(n) end
  exhausted = last >= top
end
local out = { '' }
local kept, examined = 0, nil
-- Records are loaded a slice at a time, growing: a page that fills from its first
-- records (no filter, or a common one) reads only those, not the whole budget.
local from, slice = 1, math.max(limit, 64)
while from <= #ids do
  local to = math.min(from + slice - 1, #ids)
  load({ unpack(ids, from, to) })
  for i = from, to do
    local id = ids[i]
    examined = id
    local state, attempt, _, created_at, _, finished_at, _, _, _, _, _, run, queue, texts =
      job(id)
    if state
      and (f_state == '' or state == tonumber(f_state))
      and (f_run == '' or run == f_run)
      and (f_queue == '' or queue == f_queue) then
      local spec, _, _, err = unpack_texts(texts)
      -- The kind comes first, after the trace context of a traced job (packed.rs).
      if f_kind == ''
        or (string.match(spec, '^\030[^\030]*\030([^\031]*)')
          or string.match(spec, '^[^\031]*')) == f_kind then
        for _, v in ipairs({ id, S(state), S(attempt), S(created_at), S(finished_at), run,
          queue, spec, err or '' }) do
          out[#out + 1] = v
        end
        kept = kept + 1
        if kept >= limit then
          out[1] = id
          return out
        end
      end
    end
  end
  from = to + 1
  slice = math.min(slice * 2, 1024)
end
if not exhausted and examined then out[1] = examined end
return out
