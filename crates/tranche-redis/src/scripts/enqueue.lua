-- Enqueue items into one run, all or nothing: the caller validated every spec, so
-- nothing below can fail half way. ARGV from A: run, has on_done ('1'/'0'), the
-- on_done spec (8 args), then per item: type (j, c, g), step or member count, specs
-- (a group's callback last). Returns per item: existed ('1'/'0'), id count, ids.
local run = ARGV[A]
ensure_run(run)
if ARGV[A + 1] == '1' then
  local o = spec_at(A + 2)
  redis.call('HSET', rk(run), 'od', '1', 'od_kind', o[1], 'od_q', o[2], 'od_args', o[3],
    'od_max', o[4], 'od_pr', o[5], 'od_hasuk', o[6], 'od_uk', o[7], 'od_nb', o[8])
end
local i = A + 2 + SPEC_ARGS
local out = {}
local function emit(existed, ids)
  out[#out + 1] = existed
  out[#out + 1] = S(#ids)
  for _, id in ipairs(ids) do out[#out + 1] = S(id) end
end
while i <= #ARGV do
  local kind, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local specs = {}
  local count = n
  if kind == 'g' then count = n + 1 end
  for s = 1, count do
    specs[s] = spec_at(i)
    i = i + SPEC_ARGS
  end
  -- The item's identity for a unique key: the job, a chain's head, a group's callback.
  local identity = specs[count]
  if kind == 'c' then identity = specs[1] end
  local existing = false
  if identity[6] == '1' then
    existing = redis.call('HGET', P .. 'uq:' .. run, identity[7])
  end
  if existing then
    emit('1', { tonumber(existing) })
  else
    local last = redis.call('INCRBY', P .. 'seq:job', count)
    local first = last - count + 1
    local ids = {}
    if kind == 'g' then
      local cb = last
      redis.call('HSET', P .. 'g:' .. S(cb), 'left', S(n), 'cb', S(cb))
      insert(run, specs[count], PENDING, cb, nil, nil)
      for s = 1, n do
        local id = first + s - 1
        redis.call('RPUSH', P .. 'gm:' .. S(cb), S(id))
        insert(run, specs[s], AVAILABLE, id, nil, cb)
        ids[s] = id
      end
      ids[n + 1] = cb
      if n == 0 then release_callback(S(cb)) end
    else
      for s = 1, n do
        local id = first + s - 1
        local next_id = nil
        if s < n then next_id = id + 1 end
        local state = AVAILABLE
        if s > 1 then state = PENDING end
        insert(run, specs[s], state, id, next_id, nil)
        ids[s] = id
      end
    end
    emit('0', ids)
  end
end
finish()
return out
