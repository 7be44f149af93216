-- Enqueue items into one run, all or nothing: the caller validated every spec, so
-- nothing below can fail half way. ARGV from A: run, has on_done ('1'/'0'), the
-- on_done spec (SPEC_ARGS), then per item: type (c: a chain, a single job being a chain
-- of one; g: a group; a: a gate), step or member count (a gate's: the arrivals it
-- awaits), specs (a group's callback last; a gate's one job). Returns per item:
-- existed ('1'/'0'), first id, id count.
local run = ARGV[A]
ensure_run(run)
if ARGV[A + 1] == '1' then
  local on_done_spec = A + 2
  local fields = { 'od', '1' }
  for offset, field in ipairs(ON_DONE_FIELDS) do
    fields[#fields + 1] = field
    fields[#fields + 1] = ARGV[on_done_spec + offset - 1]
  end
  redis.call('HSET', run_key(run), unpack(fields))
end
-- Unique keys with a window, across runs (the rules: tranche_types::unique). `P uw:<key>`
-- holds '<id> <window end, µs>' of the key's newest windowed job. The window is judged
-- against NOW (the backend's clock); the key's PX, in Redis's own time, only bounds
-- its memory.
local function window_key(key) return P .. 'uw:' .. key end

-- The job holding `key`: the newest windowed one, inside its window, neither failed
-- nor cancelled (nor expired with its bucket); false when none does.
local function window_holder(key)
  local held = redis.call('GET', window_key(key))
  if not held then return false end
  local id, ends = string.match(held, '^(%d+) (%d+)$')
  if not id or tonumber(ends) <= NOW then return false end
  local state = job(id)
  if not state or state == FAILED or state == CANCELLED then return false end
  return id
end

local function open_window(key, id, window_us)
  redis.call('SET', window_key(key), S(id) .. ' ' .. S(NOW + window_us), 'PX',
    math.ceil(window_us / 1000))
end

local i = A + 2 + SPEC_ARGS
local out = {}
-- An item's ids are consecutive in the order returned (a group's callback takes the
-- id after its members), so each comes back as its first id and count.
local function emit(existed, first, count)
  out[#out + 1] = existed
  out[#out + 1] = S(first)
  out[#out + 1] = S(count)
end
-- One id block for the whole batch (an item found by its unique key leaves its ids
-- unused): one INCRBY instead of one per item.
local total, j = 0, i
while j <= #ARGV do
  local n = tonumber(ARGV[j + 1])
  if ARGV[j] == 'g' then n = n + 1 elseif ARGV[j] == 'a' then n = 1 end
  total = total + n
  j = j + 2 + n * SPEC_ARGS
end
local next_id = redis.call('INCRBY', P .. 'seq:job', total) - total + 1
while i <= #ARGV do
  local kind, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  -- Specs by their first argument's index: no table per spec.
  local specs = {}
  local count = n
  if kind == 'g' then count = n + 1 elseif kind == 'a' then count = 1 end
  for s = 1, count do
    specs[s] = i
    i = i + SPEC_ARGS
  end
  -- The item's identity for a unique key: the job, a chain's head, a group's callback,
  -- a gate's job.
  local identity = specs[count]
  if kind == 'c' then identity = specs[1] end
  local existing = false
  local unique = ARGV[identity + SPEC_HAS_UNIQUE_KEY]
  local window = nil
  if unique == '1' then
    existing = redis.call('HGET', P .. 'uq:' .. run, ARGV[identity + SPEC_UNIQUE_KEY])
  elseif unique ~= '0' then
    window = tonumber(string.sub(unique, 2))
    existing = window_holder(ARGV[identity + SPEC_UNIQUE_KEY])
  end
  if existing then
    emit('1', existing, 1)
  else
    local first = next_id
    local last = first + count - 1
    next_id = last + 1
    if kind == 'g' then
      -- A group is known by its callback's id.
      local callback = last
      local group = S(callback)
      redis.call('HSET', P .. 'g:' .. group, 'left', S(n), 'cb', group)
      insert(run, specs[count], PENDING, callback, nil, nil)
      local members = {}
      for s = 1, n do
        local id = first + s - 1
        members[s] = S(id)
        insert(run, specs[s], AVAILABLE, id, nil, callback)
      end
      call_chunked('RPUSH', P .. 'gm:' .. group, members)
      if n == 0 then release_callback(group) end
      if window then open_window(ARGV[identity + SPEC_UNIQUE_KEY], callback, window) end
    elseif kind == 'a' then
      insert(run, specs[1], PENDING, first, nil, nil)
      open_gate(S(first), n)
      if window then open_window(ARGV[identity + SPEC_UNIQUE_KEY], first, window) end
    else
      for s = 1, n do
        local id = first + s - 1
        local next_step = nil
        if s < n then next_step = id + 1 end
        local state = AVAILABLE
        if s > 1 then state = PENDING end
        insert(run, specs[s], state, id, next_step, nil)
      end
      if window then open_window(ARGV[identity + SPEC_UNIQUE_KEY], first, window) end
    end
    emit('0', first, count)
  end
end
finish()
return out
