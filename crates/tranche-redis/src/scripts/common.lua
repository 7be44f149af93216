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
local stats = {}         -- queue -> field -> delta of P qst:<queue>
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

-- The buffer key of a job id, whether it came as an ARGV string or a number.
local function K(id)
  if type(id) == 'number' then return S(id) end
  return id
end

-- Jobs live in bucket hashes, a thousand to a bucket: `P b:<id without its last three
-- digits>`, the job being the field `<id>`. The field `#` counts the bucket's jobs
-- that have not ended; a bucket where it reaches 0 expires after the retention and
-- one where it rises again is kept. Why: looking up a key among millions costs Redis
-- ~2 µs (a cache miss or several), a field of a bucket that a batch of consecutive
-- ids just touched ~0.2 µs; a job costs one key lookup in the whole keyspace per batch
-- instead of six of its own, no EXPIRE of its own, and less than half the memory.
--
-- A job's value is packed binary (Redis's `struct`), read into locals, as decoding it
-- into a table would cost Lua about as much as the lookups this layout saves:
--   local st, att, av, cr, sa, fi, pr, ne, uf, nx, gr, run, q, tx = job(id)
-- state, attempt, available_at, created, started and finished (micros, 0: not yet),
-- priority, has attempt errors and cancelled by an upstream failure (0/1), next chain
-- step and group (ids, '' for none), run, queue; then `tx`, its texts still packed
-- (see `texts`), which most transitions carry over unread. A script reads a job once
-- (`job`, or `load` for a batch: one HMGET per bucket) and writes it with `put`;
-- `flush_jobs` writes every changed job with one HSET per bucket.
local CTRL = '<BI4ddddhBBBc0Bc0Bc0I4c0'
local function encode(st, att, av, cr, sa, fi, pr, ne, uf, nx, gr, run, q, tx)
  return struct.pack(CTRL, st, att, av, cr, sa, fi, pr, ne, uf, #nx, nx, #gr, gr, #run, run,
    #q, q) .. tx
end

-- The fixed-width head of a job: state (byte 1), attempt (2-5), available_at (6-13),
-- created (14-21), started (22-29), finished (30-37). The hot transitions rewrite
-- these bytes and copy the rest of the job as it is.
local NOW_D = struct.pack('<d', NOW)
local STATE_BYTE = {}
for st = 0, 5 do STATE_BYTE[st] = string.char(st) end

-- The texts: d (kind, max attempts and args, packed by the client: see packed.rs),
-- input, result, last error, unique key; each a presence byte, a length and bytes.
local TX = '<BI4c0BI4c0BI4c0BI4c0BI4c0'
local function texts(tx)
  local hd, d, hi, i, hr, r, he, e, hu, u = struct.unpack(TX, tx)
  if hd == 0 then d = nil end
  if hi == 0 then i = nil end
  if hr == 0 then r = nil end
  if he == 0 then e = nil end
  if hu == 0 then u = nil end
  return d, i, r, e, u
end
local function pack_texts(d, i, r, e, u)
  return struct.pack(TX, d and 1 or 0, d and #d or 0, d or '', i and 1 or 0, i and #i or 0,
    i or '', r and 1 or 0, r and #r or 0, r or '', e and 1 or 0, e and #e or 0, e or '',
    u and 1 or 0, u and #u or 0, u or '')
end
-- The texts after `d` of a job that has only `d`.
local ONLY_D = string.sub(pack_texts('', nil, nil, nil, nil), 6)

-- `tx` with text number `n` (1 d, 2 input, 3 result, 4 error, 5 unique key) set to
-- `v` (nil: unset).
local function with_text(tx, n, v)
  local t = { texts(tx) }
  t[n] = v
  return pack_texts(t[1], t[2], t[3], t[4], t[5])
end

local recs = {}          -- id -> packed job, or false: no such job (for this script)
local dirty = {}         -- id -> true: job to write

local function bk(id) return P .. 'b:' .. string.sub(id, 1, -4) end

-- Read the jobs not read yet, with one HMGET per bucket.
local function load(ids)
  local by_bucket, order = {}, {}
  for _, id in ipairs(ids) do
    if recs[id] == nil then
      local b = bk(id)
      local l = by_bucket[b]
      if not l then
        l = {}
        by_bucket[b] = l
        order[#order + 1] = b
      end
      l[#l + 1] = id
    end
  end
  for _, b in ipairs(order) do
    local fields = by_bucket[b]
    for from = 1, #fields, CHUNK do
      local to = math.min(from + CHUNK - 1, #fields)
      local v = redis.call('HMGET', b, unpack(fields, from, to))
      for i = from, to do recs[fields[i]] = v[i - from + 1] end
    end
  end
end

-- A job as 14 values (see CTRL), nothing when there is no such job. `id` is a string.
local function job(id)
  local s = recs[id]
  if s == nil then
    s = redis.call('HGET', bk(id), id)
    recs[id] = s
  end
  if s then
    local st, att, av, cr, sa, fi, pr, ne, uf, nx, gr, run, q, at = struct.unpack(CTRL, s)
    return st, att, av, cr, sa, fi, pr, ne, uf, nx, gr, run, q, string.sub(s, at)
  end
end

local function put(id, packed)
  recs[id] = packed
  dirty[id] = true
end

local live = {}          -- bucket key -> delta of its jobs that have not ended

local function add_live(id, d)
  local b = bk(id)
  live[b] = (live[b] or 0) + d
end

local function flush_jobs()
  local sets = {}
  for id in pairs(dirty) do
    local b = bk(id)
    local l = sets[b]
    if not l then
      l = {}
      sets[b] = l
    end
    l[#l + 1] = id
    l[#l + 1] = recs[id]
  end
  dirty = {}
  for b, l in pairs(sets) do call_chunked('HSET', b, l) end
  for b, d in pairs(live) do
    if d ~= 0 then
      local n = redis.call('HINCRBY', b, '#', d)
      if n <= 0 then
        redis.call('EXPIRE', b, KEEP)
      elseif n - d <= 0 then
        redis.call('PERSIST', b)
      end
    end
  end
  live = {}
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

-- Per-queue statistics, `P qst:<queue>` (hash): `started`, `succeeded`, `failed`,
-- `retried`, `expired`, and two histograms of times in µs, `w<i>`/`r<i>` (how many
-- waits (runnable to reserved) and runs (reserved to result applied) fell in bucket
-- i, 1-based) and `ws`/`rs` (their sums). The buckets' upper bounds, BOUNDS (µs,
-- inclusive: tranche_types::LATENCY_BUCKETS_US, with BOUNDS[0] = -1 below them and
-- padded with math.huge to 31 entries, so that a bucket is found with five
-- comparisons) and the field names WAIT_F and RUN_F are constants that scripts.rs
-- prepends to every script, written out: nothing is computed per call.
--
-- This runs for every job reserved and completed, so it is kept to a few Lua
-- instructions per job: times are tallied into the current bucket while they stay
-- within its bounds (a batch's jobs mostly waited and ran about as long), and the
-- bucket is searched for, and the tally written to the queue's table, only when one
-- does not. Everything is written with one HINCRBY per (queue, field) by finish().
local function bucket(us)
  local i = 0
  if us > BOUNDS[i + 16] then i = i + 16 end
  if us > BOUNDS[i + 8] then i = i + 8 end
  if us > BOUNDS[i + 4] then i = i + 4 end
  if us > BOUNDS[i + 2] then i = i + 2 end
  if us > BOUNDS[i + 1] then i = i + 1 end
  return i + 1
end

local function queue_stats(queue)
  local s = stats[queue]
  if not s then
    s = {}
    stats[queue] = s
  end
  return s
end

-- Count one more `field` (started, ...) for the queue.
local function stat(queue, field)
  local s = queue_stats(queue)
  s[field] = (s[field] or 0) + 1
end

-- The run-time tally: its queue's table, the current bucket (lower bound exclusive,
-- upper inclusive, field) and the runs counted in it and their sum, not yet added.
local run_q, run_s, run_lo, run_hi, run_f, run_n, run_sum = nil, nil, 1, 0, nil, 0, 0

local function run_flush()
  if run_n > 0 then
    run_s[run_f] = (run_s[run_f] or 0) + run_n
    run_s.rs = (run_s.rs or 0) + run_sum
    run_n, run_sum = 0, 0
  end
end

-- An attempt reserved at `sa` ended now as `field` (succeeded, failed, retried).
local function ran(queue, field, sa)
  if queue ~= run_q then
    run_flush()
    run_q, run_s, run_lo, run_hi = queue, queue_stats(queue), 1, 0
  end
  run_s[field] = (run_s[field] or 0) + 1
  local us = NOW - sa
  if us < 0 then us = 0 end
  if us > run_hi or us <= run_lo then
    run_flush()
    local b = bucket(us)
    run_lo, run_hi, run_f = BOUNDS[b - 1], BOUNDS[b], RUN_F[b]
  end
  run_n, run_sum = run_n + 1, run_sum + us
end

local function flush_stats()
  run_flush()
  run_q = nil
  for queue, s in pairs(stats) do
    local key = P .. 'qst:' .. queue
    for field, d in pairs(s) do
      if d ~= 0 then redis.call('HINCRBY', key, field, S(d)) end
    end
  end
  stats = {}
end

local function flush_ready()
  for queue, members in pairs(ready) do flush_zset(P .. 'qr:' .. queue, members) end
  ready = {}
end

-- Apply every buffered write except the counters (flushed per run by finish()).
local function flush_writes()
  flush_jobs()
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
  flush_stats()
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
local LETTER = {}
for n = 1, 20 do LETTER[n] = string.char(64 + n) end
local function ready_member(avail, id)
  local sid = K(id)
  local head = NOW_MEMBER
  if avail ~= NOW then head = string.format('%017d:', avail) end
  return head .. LETTER[#sid] .. sid
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
    redis.call('ZADD', P .. 'qs:' .. queue, S(avail), K(id))
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

-- An ended job's data expires after the retention (with its bucket, once every job
-- of the bucket has ended); a revived one keeps it again. `errors` false: the job
-- never recorded an attempt error (`ne` unset), so it has no error list to expire.
local function ended(id, errors)
  add_live(id, -1)
  if errors ~= false then redis.call('EXPIRE', ek(id), KEEP) end
end

local function revived(id)
  add_live(id, 1)
  redis.call('PERSIST', ek(id))
end

-- The caller marks the job as having errors (`ne` 1).
local function record_error(id, attempt, err)
  redis.call('RPUSH', ek(id), S(attempt) .. '|' .. NOW_S .. '|' .. err)
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
-- client: see packed.rs); `spec` is the index of the first in ARGV, or a table of
-- the 6. `id` is a number.
local function insert(run, spec, state, id, next_id, group)
  local queue, prio, has_uk, uk, nb, d
  if type(spec) == 'number' then
    queue, prio, has_uk, uk = ARGV[spec], ARGV[spec + 1], ARGV[spec + 2], ARGV[spec + 3]
    nb, d = ARGV[spec + 4], ARGV[spec + 5]
  else
    queue, prio, has_uk, uk, nb, d = spec[1], spec[2], spec[3], spec[4], spec[5], spec[6]
  end
  local sid = S(id)
  local avail = NOW
  if nb ~= '' and tonumber(nb) > NOW then avail = tonumber(nb) end
  local tx
  if has_uk == '1' then
    redis.call('HSETNX', P .. 'uq:' .. run, uk, sid)
    tx = pack_texts(d, nil, nil, nil, uk)
  else
    tx = struct.pack('<BI4c0', 1, #d, d) .. ONLY_D
  end
  put(sid, encode(state, 0, avail, NOW, 0, 0, tonumber(prio), 0, 0,
    next_id and S(next_id) or '', group and S(group) or '', run, queue, tx))
  add_live(sid, 1)
  note_job(run, id)
  queues[queue] = true
  moved(sid, run, nil, state)
  if state == AVAILABLE then make_available(sid, queue, prio, avail) end
end

-- A job's max attempts, from its packed `d` text.
local function max_attempts(tx)
  local d = texts(tx)
  return tonumber(string.match(d, '^[^\031]*\031(%d+)\031'))
end

-- `tx` with its input (the second text) set: the first is copied as it is.
local function with_input(tx, input)
  local _, _, at = struct.unpack('<BI4c0', tx)
  local _, _, after = struct.unpack('<BI4c0', tx, at)
  return string.sub(tx, 1, at - 1) .. struct.pack('<BI4', 1, #input) .. input
    .. string.sub(tx, after)
end

-- Make a pending job runnable with `input`; a no-op unless it is pending.
local function release_pending(id, input)
  local st, _, av, _, _, _, pr, _, _, _, _, run, q, tx = job(id)
  if st ~= PENDING then return end
  av = math.max(av, NOW)
  local s = recs[id]
  put(id, STATE_BYTE[AVAILABLE] .. string.sub(s, 2, 5) .. struct.pack('<d', av)
    .. string.sub(s, 14, #s - #tx) .. with_input(tx, input))
  moved(id, run, PENDING, AVAILABLE)
  make_available(id, q, pr, av)
end

-- The members' outcomes as JSON, in member order. Results are JSON text already:
-- embedded as they are when they parse, left out otherwise.
local function group_outcomes(group)
  local members = redis.call('LRANGE', P .. 'gm:' .. group, 0, -1)
  load(members)
  local parts = {}
  for i, m in ipairs(members) do
    local st, _, _, _, _, _, _, _, _, _, _, _, _, tx = job(m)
    local res, err
    if tx then
      local _
      _, _, res, err = texts(tx)
    end
    local s = '{"job":' .. m .. ',"state":"' .. COUNTER[st or FAILED] .. '"'
    if res and pcall(cjson.decode, res) then s = s .. ',"result":' .. res end
    if err then s = s .. ',"error":' .. cjson.encode(err) end
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

-- End a job that has not ended yet as cancelled. Returns its next step and group.
local function cancel_one(id, why, upstream_failed)
  local st, att, av, cr, sa, fi, pr, ne, uf, nx, gr, run, q, tx = job(id)
  if st == AVAILABLE then unready(id, q, av) end
  if st == RUNNING then unlease(id, q) end
  put(id, encode(CANCELLED, att, av, cr, sa, NOW, pr, ne, upstream_failed and 1 or 0, nx,
    gr, run, q, with_text(tx, 4, why)))
  moved(id, run, st, CANCELLED)
  if upstream_failed then redis.call('SADD', P .. 'cfail:' .. run, id) end
  ended(id, ne == 1)
  return nx, gr
end

-- Cancel the chain steps from `next_id` on that have not ended.
local function cancel_successors(next_id, why, upstream_failed)
  local cursor = next_id
  while cursor ~= '' do
    local st, _, _, _, _, _, _, _, _, nx, gr = job(cursor)
    if not st then break end
    if st < SUCCEEDED then
      cancel_one(cursor, why, upstream_failed)
      if gr ~= '' then member_ended(gr) end
    end
    cursor = nx
  end
end

-- A job ended without success: cancel the rest of its chain and count it for its
-- group. `failed` marks the cancelled successors as revivable by a run retry.
local function job_ended(id, next_id, group, failed)
  if next_id ~= '' then
    local why
    if failed then
      why = 'upstream job ' .. id .. ' failed'
    else
      why = 'upstream job ' .. id .. ' was cancelled'
    end
    cancel_successors(next_id, why, failed)
  end
  if group ~= '' then member_ended(group) end
end

-- Apply one attempt's result if the attempt still holds the job; false if stale.
-- kind: s(ucceeded) payload=result, r(etry) payload=error at, z (snooze) at,
-- c(ancelled) payload=reason, f(ailed) payload=error; e: as r, for a lease that
-- expired (counted as such, not as a run). `id` is a string.
local function apply_resolution(id, attempt, kind, payload, at)
  local st, att, av, cr, sa, fi, pr, ne, uf, nx, gr, run, q, tx = job(id)
  if st ~= RUNNING or att ~= tonumber(attempt) then return false end
  unlease(id, q)
  if kind == 's' then
    local d, i, _, e, u = texts(tx)
    if ne == 1 then e = nil end
    local s = recs[id]
    put(id, STATE_BYTE[SUCCEEDED] .. string.sub(s, 2, 29) .. NOW_D
      .. string.sub(s, 38, #s - #tx) .. pack_texts(d, i, payload, e, u))
    moved(id, run, RUNNING, SUCCEEDED)
    ran(q, 'succeeded', sa)
    ended(id, ne == 1)
    if nx ~= '' then release_pending(nx, payload) end
    if gr ~= '' then member_ended(gr) end
  elseif kind == 'r' or kind == 'e' then
    av = math.max(tonumber(at), NOW)
    record_error(id, att, payload)
    local out_of_attempts = att >= max_attempts(tx)
    tx = with_text(tx, 4, payload)
    if kind == 'e' then
      stat(q, 'expired')
      if out_of_attempts then stat(q, 'failed') end
    elseif out_of_attempts then
      ran(q, 'failed', sa)
    else
      ran(q, 'retried', sa)
    end
    if out_of_attempts then
      put(id, encode(FAILED, att, av, cr, sa, NOW, pr, 1, uf, nx, gr, run, q, tx))
      moved(id, run, RUNNING, FAILED)
      redis.call('ZADD', P .. 'fail:' .. run, id, id)
      ended(id, true)
      job_ended(id, nx, gr, true)
    else
      put(id, encode(AVAILABLE, att, av, cr, sa, fi, pr, 1, uf, nx, gr, run, q, tx))
      moved(id, run, RUNNING, AVAILABLE)
      make_available(id, q, pr, av)
    end
  elseif kind == 'z' then
    av = math.max(tonumber(at), NOW)
    put(id, encode(AVAILABLE, att - 1, av, cr, sa, fi, pr, ne, uf, nx, gr, run, q, tx))
    moved(id, run, RUNNING, AVAILABLE)
    make_available(id, q, pr, av)
  elseif kind == 'c' then
    put(id, encode(CANCELLED, att, av, cr, sa, NOW, pr, ne, uf, nx, gr, run, q,
      with_text(tx, 4, payload)))
    moved(id, run, RUNNING, CANCELLED)
    ended(id, ne == 1)
    job_ended(id, nx, gr, false)
  else
    record_error(id, att, payload)
    ran(q, 'failed', sa)
    put(id, encode(FAILED, att, av, cr, sa, NOW, pr, 1, uf, nx, gr, run, q,
      with_text(tx, 4, payload)))
    moved(id, run, RUNNING, FAILED)
    redis.call('ZADD', P .. 'fail:' .. run, id, id)
    ended(id, true)
    job_ended(id, nx, gr, true)
  end
  return true
end

local SPEC_ARGS = 6

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
