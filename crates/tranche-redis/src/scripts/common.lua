-- Shared by every script (prepended to each): key names, counters, the change feed,
-- readiness, and the cascades of an ended job (chain successors, group callbacks, run
-- finish). Every script gets KEYS[1] = the prefix (its hash tag puts every key built
-- from it in one cluster slot) and ARGV[1..3] = now (micros, from the backend's
-- clock: Redis TIME is never used), retention in seconds, feed max length.
local P = KEYS[1]
local NOW = tonumber(ARGV[1])
local KEEP = ARGV[2] -- seconds, kept as the string Redis is sent
local FEED_MAX = ARGV[3]
local A = 4 -- the first script-specific argument

local PENDING, AVAILABLE, RUNNING, SUCCEEDED, FAILED, CANCELLED = 0, 1, 2, 3, 4, 5
local COUNTER = { [0] = 'pending', 'available', 'running', 'succeeded', 'failed', 'cancelled' }
-- States as the strings stored, so that hot paths never format a number.
local ST = { [0] = '0', '1', '2', '3', '4', '5' }

local function jk(id) return P .. 'j:' .. id end
local function ek(id) return P .. 'e:' .. id end
local function rk(run) return P .. 'r:' .. run end

local touched, touched_list = {}, {}
local woken, woken_list = {}, {}
local cancelled_count = 0

-- Writes to shared keys are buffered and applied once per script by finish() (or a
-- flush before a read of the same key): a batch of 1,000 jobs then costs a few ZADD,
-- SADD and HINCRBY calls instead of thousands. Redis time per call, not per byte, is
-- what bounds a fleet's throughput. Each buffer keeps the last write per member, so
-- applying it later gives the same end state as writing in place.
local counts = {}        -- run -> counter -> delta
local running = {}       -- queue -> delta of P qrun
local queues = {}        -- queue names seen (P queues)
local leases = {}        -- job id -> lease expiry, or false: leave P leased
local segments = {}      -- run -> new job ids as {first, last} ranges (P ids:<run>)
local ready = {}         -- queue -> member -> priority, or false: leave P qr:<queue>
local ev_id, ev_run, ev_state = {}, {}, {}

local CHUNK = 4000 -- arguments per buffered call, well inside Lua's unpack limit

local function call_chunked(cmd, key, items)
  local i = 1
  while i <= #items do
    local j = math.min(i + CHUNK - 1, #items)
    redis.call(cmd, key, unpack(items, i, j))
    i = j + 1
  end
end

local function S(n) return string.format('%d', n) end
local NOW_S = ARGV[1]

-- Attempt numbers as strings, formatted once per script.
local small = {}
local function N(n)
  local s = small[n]
  if not s then
    s = S(n)
    small[n] = s
  end
  return s
end

-- The buffer key of a job id, whether it came as an ARGV string or a number.
local function K(id)
  if type(id) == 'number' then return S(id) end
  return id
end

local function touch(run)
  if not touched[run] then
    touched[run] = true
    touched_list[#touched_list + 1] = run
  end
end

local function count(run, field, d)
  local c = counts[run]
  if not c then
    c = {}
    counts[run] = c
  end
  c[field] = (c[field] or 0) + d
end

local function flush_counts(run)
  local c = counts[run]
  if not c then return end
  counts[run] = nil
  for field, d in pairs(c) do
    if d ~= 0 then redis.call('HINCRBY', P .. 'r:' .. run, field, d) end
  end
end

local function wake(queue)
  if not woken[queue] then
    woken[queue] = true
    woken_list[#woken_list + 1] = queue
  end
end

-- A job moved from `from` (nil: just created) to `to`: the run's counters move and
-- the feed gets its event, both inside this script, so they commit with the change.
local function moved(id, run, from, to)
  if from == nil then
    count(run, 'total', 1)
  else
    count(run, COUNTER[from], -1)
  end
  count(run, COUNTER[to], 1)
  if to == CANCELLED then cancelled_count = cancelled_count + 1 end
  touch(run)
  local n = #ev_id + 1
  ev_id[n], ev_run[n], ev_state[n] = K(id), run, ST[to]
end

local function lease(id, until_at) leases[K(id)] = until_at end

-- A run's jobs are found (by a run cancel) from the id ranges its enqueues took: one
-- list entry per script instead of a set member per job.
local function note_job(run, id)
  local l = segments[run]
  if not l then
    l = {}
    segments[run] = l
  end
  local last = l[#l]
  if last and last[2] + 1 == id then
    last[2] = id
  else
    l[#l + 1] = { id, id }
  end
end

-- Write a buffer of member -> score (add or move) or false (remove) to a sorted set.
local function flush_zset(key, members)
  local add, rem = {}, {}
  for m, score in pairs(members) do
    if score then
      add[#add + 1] = score
      add[#add + 1] = m
    else
      rem[#rem + 1] = m
    end
  end
  call_chunked('ZREM', key, rem)
  call_chunked('ZADD', key, add)
end

local function flush_ready()
  for queue, members in pairs(ready) do flush_zset(P .. 'qr:' .. queue, members) end
  ready = {}
end

-- Apply every buffered write except the counters (flushed per run by finish()).
local function flush_writes()
  flush_ready()
  flush_zset(P .. 'leased', leases)
  leases = {}
  for run, l in pairs(segments) do
    local ranges = {}
    for i, r in ipairs(l) do ranges[i] = S(r[1]) .. '-' .. S(r[2]) end
    call_chunked('RPUSH', P .. 'ids:' .. run, ranges)
  end
  segments = {}
  for queue, d in pairs(running) do
    if d ~= 0 then redis.call('HINCRBY', P .. 'qrun', queue, d) end
  end
  running = {}
  local names = {}
  for q in pairs(queues) do names[#names + 1] = q end
  queues = {}
  call_chunked('SADD', P .. 'queues', names)
end

-- One feed entry per script: its id is the last event's seq, and it holds them all
-- (seqs last - n + 1 .. last, in order), so readers page by seq as before while a
-- batch of 1,000 changes costs one XADD. Trimmed by seq: about FEED_MAX events kept.
local function emit_events()
  local n = #ev_id
  if n == 0 then return end
  local last = redis.call('INCRBY', P .. 'seq:ev', n)
  local runs, index, parts = {}, {}, {}
  for i = 1, n do
    local r = ev_run[i]
    local ri = index[r]
    if not ri then
      runs[#runs + 1] = r
      ri = S(#runs)
      index[r] = ri
    end
    parts[i] = ev_id[i] .. ',' .. ev_state[i] .. ',' .. ri
  end
  local fields = { 'n', S(n), 'a', NOW_S, 'r', table.concat(runs, ' '),
    'e', table.concat(parts, ' ') }
  local floor = last - tonumber(FEED_MAX)
  if floor > 0 then
    redis.call('XADD', P .. 'feed', 'MINID', '~', S(floor), S(last) .. '-0', unpack(fields))
  else
    redis.call('XADD', P .. 'feed', S(last) .. '-0', unpack(fields))
  end
  ev_id, ev_run, ev_state = {}, {}, {}
end

-- Ready jobs sort by priority (the score), then available_at and id (the member, fixed
-- width so that lexical order is numeric order).
-- The id is length-prefixed (a letter for its digit count, then the digits), which
-- sorts numerically and is cut back out by reserve without any number formatting.
local NOW_MEMBER = string.format('%017d:', NOW)
local function ready_member(avail, id)
  local sid = K(id)
  local head = NOW_MEMBER
  if avail ~= NOW then head = string.format('%017d:', avail) end
  return head .. string.char(64 + #sid) .. sid
end
-- Where the id starts in a ready member.
local MEMBER_ID = 20

local function set_ready(queue, member, prio)
  local r = ready[queue]
  if not r then
    r = {}
    ready[queue] = r
  end
  r[member] = prio
end

local function make_available(id, queue, prio, avail)
  if avail <= NOW then
    set_ready(queue, ready_member(avail, id), prio)
  else
    redis.call('ZADD', P .. 'qs:' .. queue, avail, K(id))
  end
  wake(queue)
end

local function unready(id, queue, avail)
  set_ready(queue, ready_member(avail, id), false)
  redis.call('ZREM', P .. 'qs:' .. queue, S(id))
end

local function take_lease(id, queue, until_at)
  lease(id, until_at)
  running[queue] = (running[queue] or 0) + 1
end

local function unlease(id, queue)
  lease(id, false)
  running[queue] = (running[queue] or 0) - 1
end

-- An ended job's data expires after the retention; a revived one keeps it again.
-- `errors` false: the job never recorded an attempt error (field `ne` unset), so it
-- has no error list to expire.
local function ended(id, errors)
  redis.call('EXPIRE', jk(id), KEEP)
  if errors ~= false then redis.call('EXPIRE', ek(id), KEEP) end
end

local function revived(id)
  redis.call('PERSIST', jk(id))
  redis.call('PERSIST', ek(id))
end

local function record_error(id, attempt, err)
  redis.call('RPUSH', ek(id), S(attempt) .. '|' .. NOW_S .. '|' .. err)
  redis.call('HSET', jk(id), 'ne', '1')
end

local RUN_KEYS = { 'r:', 'ids:', 'fail:', 'cfail:', 'uq:', 'hook:' }

local function keep_run(run, expire)
  for _, k in ipairs(RUN_KEYS) do
    if expire then
      redis.call('EXPIRE', P .. k .. run, KEEP)
    else
      redis.call('PERSIST', P .. k .. run)
    end
  end
end

local function ensure_run(run)
  local r = rk(run)
  if redis.call('EXISTS', r) == 0 then
    local id = redis.call('INCR', P .. 'seq:run')
    redis.call('HSET', r, 'id', S(id), 'created', NOW_S, 'total', 0, 'pending', 0,
      'available', 0, 'running', 0, 'succeeded', 0, 'failed', 0, 'cancelled', 0,
      'finishes', 0)
    redis.call('ZADD', P .. 'runs', id, run)
  end
  keep_run(run, false)
end

-- A spec is 6 arguments: queue, priority, has unique key ('1'/'0'), unique key,
-- not_before ('' for none), and `d` (kind, max attempts and args, packed by the
-- client: see packed.rs). `id` is a number. Fields with their default (priority 0,
-- attempt 0) are not written: fewer fields make every later read and write cheaper.
local function insert(run, spec, state, id, next_id, group)
  local queue, prio, has_uk, uk, nb, d = spec[1], spec[2], spec[3], spec[4], spec[5], spec[6]
  local sid = S(id)
  local avail, avail_s = NOW, NOW_S
  if nb ~= '' and tonumber(nb) > NOW then avail, avail_s = tonumber(nb), nb end
  local fields = { 'run', run, 'q', queue, 'st', ST[state], 'av', avail_s, 'cr', NOW_S,
    'd', d }
  if prio ~= '0' then fields[#fields + 1] = 'pr'; fields[#fields + 1] = prio end
  if next_id then fields[#fields + 1] = 'nx'; fields[#fields + 1] = S(next_id) end
  if group then fields[#fields + 1] = 'gr'; fields[#fields + 1] = S(group) end
  if has_uk == '1' then
    fields[#fields + 1] = 'uk'; fields[#fields + 1] = uk
    redis.call('HSETNX', P .. 'uq:' .. run, uk, sid)
  end
  redis.call('HSET', jk(sid), unpack(fields))
  note_job(run, id)
  queues[queue] = true
  moved(sid, run, nil, state)
  if state == AVAILABLE then make_available(sid, queue, prio, avail) end
end

-- A job's max attempts, from its packed `d` field.
local function max_attempts(k)
  local d = redis.call('HGET', k, 'd')
  return tonumber(string.match(d, '^[^\031]*\031(%d+)\031'))
end

-- Make a pending job runnable with `input`; a no-op unless it is pending.
local function release_pending(id, input)
  local v = redis.call('HMGET', jk(id), 'st', 'run', 'q', 'pr', 'av')
  if tonumber(v[1]) ~= PENDING then return end
  v[4] = v[4] or '0'
  local avail = math.max(tonumber(v[5]), NOW)
  redis.call('HSET', jk(id), 'st', ST[AVAILABLE], 'in', input, 'av', S(avail))
  moved(id, v[2], PENDING, AVAILABLE)
  make_available(id, v[3], v[4], avail)
end

-- The members' outcomes as JSON, in member order. Results are JSON text already:
-- embedded as they are when they parse, left out otherwise.
local function group_outcomes(group)
  local members = redis.call('LRANGE', P .. 'gm:' .. group, 0, -1)
  local parts = {}
  for i, m in ipairs(members) do
    local v = redis.call('HMGET', jk(m), 'st', 'res', 'err')
    local st = COUNTER[tonumber(v[1]) or FAILED]
    local s = '{"job":' .. m .. ',"state":"' .. st .. '"'
    if v[2] and pcall(cjson.decode, v[2]) then s = s .. ',"result":' .. v[2] end
    if v[3] then s = s .. ',"error":' .. cjson.encode(v[3]) end
    parts[i] = s .. '}'
  end
  return '[' .. table.concat(parts, ',') .. ']'
end

-- The group's own keys are read again only by a run retry, within the retention.
local function release_callback(group)
  local cb = redis.call('HGET', P .. 'g:' .. group, 'cb')
  release_pending(cb, group_outcomes(group))
  redis.call('EXPIRE', P .. 'g:' .. group, KEEP)
  redis.call('EXPIRE', P .. 'gm:' .. group, KEEP)
end

local function member_ended(group)
  local left = redis.call('HINCRBY', P .. 'g:' .. group, 'left', -1)
  if left == 0 then release_callback(group) end
end

-- End a job that has not ended yet (state `from`) as cancelled.
local function cancel_one(id, v_run, from, queue, avail, why, upstream_failed)
  if from == AVAILABLE then unready(id, queue, avail) end
  if from == RUNNING then unlease(id, queue) end
  redis.call('HSET', jk(id), 'st', ST[CANCELLED], 'err', why, 'fi', NOW_S,
    'uf', upstream_failed and '1' or '0')
  moved(id, v_run, from, CANCELLED)
  if upstream_failed then redis.call('SADD', P .. 'cfail:' .. v_run, S(id)) end
  ended(id)
end

-- Cancel the chain steps from `next_id` on that have not ended.
local function cancel_successors(next_id, why, upstream_failed)
  local cursor = next_id
  while cursor do
    local v = redis.call('HMGET', jk(cursor), 'st', 'run', 'nx', 'gr', 'q', 'av')
    if not v[1] then break end
    local st = tonumber(v[1])
    if st < SUCCEEDED then
      cancel_one(cursor, v[2], st, v[5], tonumber(v[6]), why, upstream_failed)
      if v[4] then member_ended(v[4]) end
    end
    cursor = v[3]
  end
end

-- A job ended without success: cancel the rest of its chain and count it for its
-- group. `failed` marks the cancelled successors as revivable by a run retry.
local function job_ended(id, next_id, group, failed)
  if next_id then
    local why
    if failed then
      why = 'upstream job ' .. id .. ' failed'
    else
      why = 'upstream job ' .. id .. ' was cancelled'
    end
    cancel_successors(next_id, why, failed)
  end
  if group then member_ended(group) end
end

-- Apply one attempt's result if the attempt still holds the job; false if stale.
-- kind: s(ucceeded) payload=result, r(etry) payload=error at, z (snooze) at,
-- c(ancelled) payload=reason, f(ailed) payload=error.
local function apply_resolution(id, attempt, kind, payload, at)
  local k = jk(id)
  -- max and priority are read only on the paths that need them: most jobs succeed.
  local v = redis.call('HMGET', k, 'st', 'att', 'run', 'q', 'nx', 'gr', 'ne')
  if tonumber(v[1]) ~= RUNNING or tonumber(v[2]) ~= tonumber(attempt) then return false end
  local att, run, queue, nx, gr = tonumber(v[2]), v[3], v[4], v[5], v[6]
  local errors = v[7] ~= false
  unlease(id, queue)
  if kind == 's' then
    redis.call('HSET', k, 'st', ST[SUCCEEDED], 'res', payload, 'fi', NOW_S)
    if errors then redis.call('HDEL', k, 'err') end
    moved(id, run, RUNNING, SUCCEEDED)
    ended(id, errors)
    if nx then release_pending(nx, payload) end
    if gr then member_ended(gr) end
  elseif kind == 'r' then
    local max, prio = max_attempts(k), redis.call('HGET', k, 'pr') or '0'
    local avail = math.max(tonumber(at), NOW)
    record_error(id, att, payload)
    if att >= max then
      redis.call('HSET', k, 'st', ST[FAILED], 'fi', NOW_S, 'av', S(avail), 'err', payload)
      moved(id, run, RUNNING, FAILED)
      redis.call('ZADD', P .. 'fail:' .. run, id, S(id))
      ended(id, true)
      job_ended(id, nx, gr, true)
    else
      redis.call('HSET', k, 'st', ST[AVAILABLE], 'av', S(avail), 'err', payload)
      moved(id, run, RUNNING, AVAILABLE)
      make_available(id, queue, prio, avail)
    end
  elseif kind == 'z' then
    local prio = redis.call('HGET', k, 'pr') or '0'
    local avail = math.max(tonumber(at), NOW)
    redis.call('HSET', k, 'st', ST[AVAILABLE], 'att', S(att - 1), 'av', S(avail))
    moved(id, run, RUNNING, AVAILABLE)
    make_available(id, queue, prio, avail)
  elseif kind == 'c' then
    redis.call('HSET', k, 'st', ST[CANCELLED], 'err', payload, 'fi', NOW_S)
    moved(id, run, RUNNING, CANCELLED)
    ended(id, errors)
    job_ended(id, nx, gr, false)
  else
    record_error(id, att, payload)
    redis.call('HSET', k, 'st', ST[FAILED], 'err', payload, 'fi', NOW_S)
    moved(id, run, RUNNING, FAILED)
    redis.call('ZADD', P .. 'fail:' .. run, id, S(id))
    ended(id, true)
    job_ended(id, nx, gr, true)
  end
  return true
end

local SPEC_ARGS = 6
local function spec_at(i)
  return { ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5] }
end

-- Mark runs that just finished (enqueueing their on-done job) or were reopened; apply
-- the buffered writes and the feed entry; then wake waiting reserves and feed readers.
-- Called once at the end of every script that changes jobs.
local function finish()
  flush_writes()
  local i = 1
  while i <= #touched_list do
    local run = touched_list[i]
    local r = rk(run)
    flush_counts(run)
    local v = redis.call('HMGET', r, 'total', 'succeeded', 'failed', 'cancelled', 'fin', 'od')
    local total = tonumber(v[1]) or 0
    local done = (tonumber(v[2]) or 0) + (tonumber(v[3]) or 0) + (tonumber(v[4]) or 0)
    if total > 0 and done == total and not v[5] then
      redis.call('HSET', r, 'fin', NOW_S)
      redis.call('HINCRBY', r, 'finishes', 1)
      if v[6] then
        local od = redis.call('HMGET', r, 'od_q', 'od_pr', 'od_hasuk', 'od_uk', 'od_nb',
          'od_d')
        local hook_run = run .. '/done'
        ensure_run(hook_run)
        local existing = false
        if od[3] == '1' then existing = redis.call('HGET', P .. 'uq:' .. hook_run, od[4]) end
        if not existing then
          insert(hook_run, od, AVAILABLE, redis.call('INCR', P .. 'seq:job'), nil, nil)
        end
      end
      -- The run's keys get their TTL after its last buffered write.
      flush_writes()
      keep_run(run, true)
    elseif done < total and v[5] then
      redis.call('HDEL', r, 'fin')
      keep_run(run, false)
    end
    i = i + 1
  end
  flush_writes()
  local feed_moved = #ev_id > 0
  emit_events()
  for _, q in ipairs(woken_list) do
    redis.call('PUBLISH', P .. 'wake', 'q:' .. q)
  end
  if feed_moved then redis.call('PUBLISH', P .. 'wake', 'f') end
end
