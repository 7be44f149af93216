-- Shared by every script (prepended to each): key names, counters, the change feed,
-- readiness, and the cascades of an ended job (chain successors, group callbacks, run
-- finish). Every script gets KEYS[1] = the prefix (its hash tag puts every key built
-- from it in one cluster slot) and ARGV[1..3] = now (micros, from the backend's
-- clock: Redis TIME is never used), retention in seconds, feed max length.
--
-- Constants scripts.rs writes out before this file, from their one definition in
-- tranche-types: the job states PENDING, AVAILABLE, RUNNING, SUCCEEDED, FAILED and
-- CANCELLED (JobState's stored numbers, which never change: they are in every job
-- record and feed entry) and STATE_NAME (state -> its name, which is also its run
-- counter's field); BOUNDS, WAIT_F and RUN_F for the statistics (see `bucket`). The
-- scripts take `state < SUCCEEDED` for a job that has not ended (the ended states are
-- numbered last; scripts.rs tests it).
--
-- Stored layouts, each documented where it is defined: a job record (RECORD: its
-- fields, index by index) and its texts (TEXTS); a spec (SPEC_ARGS); the feed entry
-- (`emit_events`); a ready-queue member (`ready_member`).
local P = KEYS[1]
local NOW = tonumber(ARGV[1])
local KEEP = ARGV[2] -- seconds, kept as the string Redis is sent
local FEED_MAX = ARGV[3]
local A = 4 -- the first script-specific argument

local function errors_key(id) return P .. 'e:' .. id end
local function run_key(run) return P .. 'r:' .. run end

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
-- one where it rises again is kept. A gate's job also has the field `g<id>`, its
-- arrivals still awaited (see `open_gate`). Why: looking up a key among millions costs Redis
-- ~2 µs (a cache miss or several), a field of a bucket that a batch of consecutive
-- ids just touched ~0.2 µs; a job costs one key lookup in the whole keyspace per batch
-- instead of six of its own, no EXPIRE of its own, and less than half the memory.
--
-- A job's value is packed binary (Redis's `struct`), read into locals, as decoding it
-- into a table would cost Lua about as much as the lookups this layout saves. The
-- record, in the order `job` returns its fields and `encode` takes them (the format
-- RECORD; it is stored data, pinned by tests/record_format.rs: a change needs a
-- migration of every bucket):
--
--   #   field            packed   meaning
--   1   state            B        JobState's stored number (PENDING .. CANCELLED)
--   2   attempt          I4       the current (or last) attempt's number; 0 before the
--                                 first reserve (a snooze or release gives it back)
--   3   available_at     d        µs: runnable from then (ready order, see `ready_member`)
--   4   created_at       d        µs: when it was enqueued
--   5   started_at       d        µs: its last reserve; 0 before the first
--   6   finished_at      d        µs: when it ended; 0 while it has not
--   7   priority         h        its score in the ready queue
--   8   has_errors       B        1: `P e:<id>` holds its attempt errors (0/1)
--   9   upstream_failed  B        1: cancelled because a chain step before it failed,
--                                 so a run retry revives it (0/1)
--  10   next_step        B c0     the chain's next job id; '' for none
--  11   group            B c0     its group's id (the callback's job id); '' for none
--  12   run              B c0     its run's name
--  13   queue            I4 c0    its queue's name
--  14   texts            rest     still packed (TEXTS below), which most transitions
--                                 copy unread
--
-- (`B c0`, `I4 c0`: a length, of one or four bytes, then that many bytes.) A script
-- reads a job once (`job`, or `load` for a batch: one HMGET per bucket) and writes it
-- with `put`; `flush_jobs` writes every changed job with one HSET per bucket:
--   local state, attempt, available_at, created_at, started_at, finished_at, priority,
--     has_errors, upstream_failed, next_step, group, run, queue, texts = job(id)
local RECORD = '<BI4ddddhBBBc0Bc0Bc0I4c0'
local function encode(state, attempt, available_at, created_at, started_at, finished_at,
    priority, has_errors, upstream_failed, next_step, group, run, queue, texts)
  return struct.pack(RECORD, state, attempt, available_at, created_at, started_at,
    finished_at, priority, has_errors, upstream_failed, #next_step, next_step, #group,
    group, #run, run, #queue, queue) .. texts
end

-- Where the fields of the record's fixed-width head start (1-based bytes): the hot
-- transitions rewrite a few of them and copy the rest of the record as it is.
local AT_ATTEMPT, AT_AVAILABLE, AT_CREATED, AT_STARTED, AT_FINISHED, AT_PRIORITY =
  2, 6, 14, 22, 30, 38
local NOW_D = struct.pack('<d', NOW)
-- Per state: its byte in a record, and its text in the feed (so that hot paths never
-- format a number).
local STATE_BYTE, STATE_TEXT = {}, {}
for state in pairs(STATE_NAME) do
  STATE_BYTE[state] = string.char(state)
  STATE_TEXT[state] = S(state)
end

-- The texts, in this order, each a presence byte (0: unset), a length and the bytes:
--   #   text         meaning
--   1   spec         kind, max attempts and args, packed by the client (packed.rs),
--                     after the trace context for a traced job (absent otherwise, so
--                     records written before traces read the same)
--   2   input        the previous chain step's result, or a group's outcomes
--   3   result       what the job returned
--   4   error        its last attempt's error, or why it was cancelled
--   5   unique_key   the key it was enqueued under, if any
local TEXTS = '<BI4c0BI4c0BI4c0BI4c0BI4c0'
local TEXT_SPEC, TEXT_INPUT, TEXT_RESULT, TEXT_ERROR, TEXT_UNIQUE_KEY = 1, 2, 3, 4, 5
-- A text packed on its own, for taking the texts apart one at a time.
local ONE_TEXT = '<BI4c0'
-- The texts as five values, nil where unset.
local function unpack_texts(texts)
  local has_spec, spec, has_input, input, has_result, result, has_error, err,
    has_unique_key, unique_key = struct.unpack(TEXTS, texts)
  if has_spec == 0 then spec = nil end
  if has_input == 0 then input = nil end
  if has_result == 0 then result = nil end
  if has_error == 0 then err = nil end
  if has_unique_key == 0 then unique_key = nil end
  return spec, input, result, err, unique_key
end
local function pack_texts(spec, input, result, err, unique_key)
  return struct.pack(TEXTS,
    spec and 1 or 0, spec and #spec or 0, spec or '',
    input and 1 or 0, input and #input or 0, input or '',
    result and 1 or 0, result and #result or 0, result or '',
    err and 1 or 0, err and #err or 0, err or '',
    unique_key and 1 or 0, unique_key and #unique_key or 0, unique_key or '')
end
-- The texts after the spec of a job that has only its spec.
local AFTER_ONLY_SPEC = string.sub(pack_texts('', nil, nil, nil, nil),
  struct.size('<BI4') + 1)

-- `texts` with the text numbered `which` (TEXT_*) set to `value` (nil: unset).
local function with_text(texts, which, value)
  local all = { unpack_texts(texts) }
  all[which] = value
  return pack_texts(all[TEXT_SPEC], all[TEXT_INPUT], all[TEXT_RESULT], all[TEXT_ERROR],
    all[TEXT_UNIQUE_KEY])
end

local records = {}       -- id -> packed job, or false: no such job (for this script)
local dirty = {}         -- id -> true: job to write

local function bucket_key(id) return P .. 'b:' .. string.sub(id, 1, -4) end

-- Read the jobs not read yet, with one HMGET per bucket.
local function load(ids)
  local by_bucket, order = {}, {}
  for _, id in ipairs(ids) do
    if records[id] == nil then
      local b = bucket_key(id)
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
      for i = from, to do records[fields[i]] = v[i - from + 1] end
    end
  end
end

-- A job as the 14 fields of its record (see RECORD), nothing when there is no such
-- job. `id` is a string.
local function job(id)
  local record = records[id]
  if record == nil then
    record = redis.call('HGET', bucket_key(id), id)
    records[id] = record
  end
  if record then
    local state, attempt, available_at, created_at, started_at, finished_at, priority,
      has_errors, upstream_failed, next_step, group, run, queue, texts_at =
      struct.unpack(RECORD, record)
    return state, attempt, available_at, created_at, started_at, finished_at, priority,
      has_errors, upstream_failed, next_step, group, run, queue,
      string.sub(record, texts_at)
  end
end

local function put(id, packed)
  records[id] = packed
  dirty[id] = true
end

local live = {}          -- bucket key -> delta of its jobs that have not ended

local function add_live(id, d)
  local b = bucket_key(id)
  live[b] = (live[b] or 0) + d
end

local function flush_jobs()
  local sets = {}
  for id in pairs(dirty) do
    local b = bucket_key(id)
    local l = sets[b]
    if not l then
      l = {}
      sets[b] = l
    end
    l[#l + 1] = id
    l[#l + 1] = records[id]
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
    count(run, STATE_NAME[from], -1)
  end
  count(run, STATE_NAME[to], 1)
  if to == CANCELLED then cancelled_count = cancelled_count + 1 end
  touch(run)
  local n = #ev_id + 1
  ev_id[n], ev_run[n], ev_state[n] = K(id), run, STATE_TEXT[to]
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

-- An attempt reserved at `started_at` ended now as `field` (succeeded, failed, retried).
local function ran(queue, field, started_at)
  if queue ~= run_q then
    run_flush()
    run_q, run_s, run_lo, run_hi = queue, queue_stats(queue), 1, 0
  end
  run_s[field] = (run_s[field] or 0) + 1
  local us = NOW - started_at
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

-- Limits (see limits.lua): `P lim` holds them, field `#k` counting the kinds with one.
-- A queue's running jobs are `P qrun`; a limited kind's are `P krun` (hash kind ->
-- count), kept only while the kind has a limit. Without any limit, a script taking jobs
-- out of running pays one EXISTS, once per call, nothing per job.
local lim_any = nil      -- whether any limit is declared, read once per script
local lim_kinds = nil    -- whether some kind has a limit
local lim_kind = {}      -- kind -> its limit (packed), or false
local lim_queue = {}     -- queue -> its limit (packed), or false
local function kinds_limited()
  if lim_kinds == nil then
    lim_kinds = tonumber(redis.call('HGET', P .. 'lim', '#k') or '0') > 0
  end
  return lim_kinds
end
local function queue_limit(queue)
  local l = lim_queue[queue]
  if l == nil then
    l = redis.call('HGET', P .. 'lim', 'q:' .. queue) or false
    lim_queue[queue] = l
  end
  return l
end
local function kind_limit(kind)
  local l = lim_kind[kind]
  if l == nil then
    l = redis.call('HGET', P .. 'lim', 'k:' .. kind) or false
    lim_kind[kind] = l
  end
  return l
end
-- A job's kind, from its packed spec (kind \031 max attempts \031 args).
local function spec_kind(packed_spec)
  return string.match(packed_spec, '^([^\031]*)\031')
end

local function unlease(id, queue)
  lease(id, false)
  running[queue] = (running[queue] or 0) - 1
  if lim_any == nil then lim_any = redis.call('EXISTS', P .. 'lim') == 1 end
  if not lim_any then return end
  -- A running slot of the queue is free: its waiting reserves look again.
  if queue_limit(queue) then wake(queue) end
  if kinds_limited() then
    local texts = select(14, job(id))
    local kind = spec_kind(unpack_texts(texts))
    if kind_limit(kind) then
      redis.call('HINCRBY', P .. 'krun', kind, -1)
      -- A slot of the kind is free: its queue's waiting reserves look again (other
      -- queues' within their poll interval).
      wake(queue)
    end
  end
end

-- An ended job's data expires after the retention (with its bucket, once every job
-- of the bucket has ended); a revived one keeps it again. `errors` false: the job
-- never recorded an attempt error (`has_errors` 0), so it has no error list to expire.
local function ended(id, errors)
  add_live(id, -1)
  if errors ~= false then redis.call('EXPIRE', errors_key(id), KEEP) end
end

local function revived(id)
  add_live(id, 1)
  redis.call('PERSIST', errors_key(id))
end

-- The caller marks the job as having errors (`has_errors` 1).
local function record_error(id, attempt, err)
  redis.call('RPUSH', errors_key(id), S(attempt) .. '|' .. NOW_S .. '|' .. err)
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
  local r = run_key(run)
  if redis.call('EXISTS', r) == 0 then
    local id = redis.call('INCR', P .. 'seq:run')
    redis.call('HSET', r, 'id', S(id), 'created', NOW_S, 'total', 0, 'pending', 0,
      'available', 0, 'running', 0, 'succeeded', 0, 'failed', 0, 'cancelled', 0,
      'finishes', 0)
    redis.call('ZADD', P .. 'runs', id, run)
  end
  keep_run(run, false)
end

-- A spec is SPEC_ARGS arguments (as enqueue.rs `push_spec` sends them), in this order:
--   offset  argument
--   0       queue
--   1       priority
--   2       has a unique key: '0' none, '1' unique in its run, 'w<µs>' unique across
--           runs for that window (enqueue.lua keeps its `P uw:<key>`; never stored
--           in a run's on-done spec, which takes no window)
--   3       the unique key ('' for none)
--   4       not_before (µs, '' for none)
--   5       spec: kind, max attempts and args, packed by the client (packed.rs)
local SPEC_ARGS = 6
local SPEC_HAS_UNIQUE_KEY, SPEC_UNIQUE_KEY = 2, 3
-- A run's on-done spec, kept in its `P r:<run>` hash as these fields, in spec order.
local ON_DONE_FIELDS = { 'od_q', 'od_pr', 'od_hasuk', 'od_uk', 'od_nb', 'od_d' }

-- Enqueue a job from a spec: `spec` is the index of its first argument in ARGV, or a
-- table of its SPEC_ARGS values (1-based). `id` is a number.
local function insert(run, spec, state, id, next_id, group)
  local queue, priority, has_unique_key, unique_key, not_before, packed_spec
  if type(spec) == 'number' then
    queue, priority, has_unique_key, unique_key, not_before, packed_spec =
      unpack(ARGV, spec, spec + SPEC_ARGS - 1)
  else
    queue, priority, has_unique_key, unique_key, not_before, packed_spec =
      unpack(spec, 1, SPEC_ARGS)
  end
  local sid = S(id)
  local available_at = NOW
  if not_before ~= '' and tonumber(not_before) > NOW then
    available_at = tonumber(not_before)
  end
  local texts
  if has_unique_key == '1' then
    redis.call('HSETNX', P .. 'uq:' .. run, unique_key, sid)
    texts = pack_texts(packed_spec, nil, nil, nil, unique_key)
  elseif has_unique_key ~= '0' then
    -- A windowed key: not the run's (`P uq:<run>`), kept in the record to be shown.
    texts = pack_texts(packed_spec, nil, nil, nil, unique_key)
  else
    texts = struct.pack(ONE_TEXT, 1, #packed_spec, packed_spec) .. AFTER_ONLY_SPEC
  end
  put(sid, encode(state, 0, available_at, NOW, 0, 0, tonumber(priority), 0, 0,
    next_id and S(next_id) or '', group and S(group) or '', run, queue, texts))
  add_live(sid, 1)
  note_job(run, id)
  queues[queue] = true
  moved(sid, run, nil, state)
  if state == AVAILABLE then make_available(sid, queue, priority, available_at) end
end

-- A job's max attempts, from its packed spec (kind \031 max attempts \031 args, maybe
-- after a trace context, which holds no \031).
local function max_attempts(texts)
  local packed_spec = unpack_texts(texts)
  return tonumber(string.match(packed_spec, '^[^\031]*\031(%d+)\031'))
end

-- `texts` with its input set: the spec before it is copied as it is.
local function with_input(texts, input)
  local _, _, input_at = struct.unpack(ONE_TEXT, texts)
  local _, _, after_input = struct.unpack(ONE_TEXT, texts, input_at)
  return string.sub(texts, 1, input_at - 1) .. struct.pack('<BI4', 1, #input) .. input
    .. string.sub(texts, after_input)
end

-- `texts` with the trace context of its packed spec set to `trace` (packed.rs: a
-- traced spec starts with '\030' trace '\030'; an untraced one with its kind).
local function with_trace(texts, trace)
  local _, spec, after_spec = struct.unpack(ONE_TEXT, texts)
  if string.byte(spec, 1) == 30 then
    spec = string.sub(spec, string.find(spec, '\030', 2, true) + 1)
  end
  spec = '\030' .. trace .. '\030' .. spec
  return struct.pack(ONE_TEXT, 1, #spec, spec) .. string.sub(texts, after_spec)
end

-- Make a pending job runnable with `input` (and `trace` as its trace context, unless
-- nil); a no-op unless it is pending.
local function release_pending(id, input, trace)
  local state, _, available_at, _, _, _, priority, _, _, _, _, run, queue, texts = job(id)
  if state ~= PENDING then return end
  available_at = math.max(available_at, NOW)
  local record = records[id]
  put(id, STATE_BYTE[AVAILABLE] .. string.sub(record, AT_ATTEMPT, AT_AVAILABLE - 1)
    .. struct.pack('<d', available_at) .. string.sub(record, AT_CREATED, #record - #texts)
    .. with_input(trace and with_trace(texts, trace) or texts, input))
  moved(id, run, PENDING, AVAILABLE)
  make_available(id, queue, priority, available_at)
end

-- The members' outcomes as JSON, in member order. Results are JSON text already:
-- embedded as they are when they parse, left out otherwise.
local function group_outcomes(group)
  local members = redis.call('LRANGE', P .. 'gm:' .. group, 0, -1)
  load(members)
  local parts = {}
  for i, member in ipairs(members) do
    local state, _, _, _, _, _, _, _, _, _, _, _, _, texts = job(member)
    local result, err
    if texts then
      local _
      _, _, result, err = unpack_texts(texts)
    end
    -- A member whose data expired is reported as failed.
    local outcome = '{"job":' .. member .. ',"state":"' .. STATE_NAME[state or FAILED]
      .. '"'
    if result and pcall(cjson.decode, result) then
      outcome = outcome .. ',"result":' .. result
    end
    if err then outcome = outcome .. ',"error":' .. cjson.encode(err) end
    parts[i] = outcome .. '}'
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

-- Gates (EnqueueItem::Gate, a workflow's JOIN): a pending job released, as a group's
-- callback is, with '[]' as its input, at the last of the arrivals it awaits
-- (commit.lua). What is left to arrive is the field `g<id>` of the job's bucket,
-- beside its record, so it goes with the job: expired with its bucket, removed by a
-- delete or a prune; the gate's opening drops it. An arrival costs an HGET and an
-- HINCRBY (or HDEL), however many it awaits.
local function gate_field(id) return 'g' .. id end

-- Gate `id` (a string), its job just inserted pending, awaits `awaits` arrivals; one
-- awaiting none opens at once.
local function open_gate(id, awaits)
  if awaits == 0 then
    release_pending(id, '[]')
  else
    redis.call('HSET', bucket_key(id), gate_field(id), S(awaits))
  end
end

-- One arrival at gate `id` (a string): its last releases the job. A no-op at a job
-- that is no gate, or a gate already open (its job released, ended or gone).
local function arrive(id)
  local b, f = bucket_key(id), gate_field(id)
  if not redis.call('HGET', b, f) then return end
  if redis.call('HINCRBY', b, f, -1) > 0 then return end
  redis.call('HDEL', b, f)
  release_pending(id, '[]')
end

-- End a job that has not ended yet as cancelled. Returns its next step and group.
local function cancel_one(id, why, upstream_failed)
  local state, attempt, available_at, created_at, started_at, _, priority, has_errors, _,
    next_step, group, run, queue, texts = job(id)
  if state == AVAILABLE then unready(id, queue, available_at) end
  if state == RUNNING then unlease(id, queue) end
  put(id, encode(CANCELLED, attempt, available_at, created_at, started_at, NOW, priority,
    has_errors, upstream_failed and 1 or 0, next_step, group, run, queue,
    with_text(texts, TEXT_ERROR, why)))
  moved(id, run, state, CANCELLED)
  if upstream_failed then redis.call('SADD', P .. 'cfail:' .. run, id) end
  ended(id, has_errors == 1)
  return next_step, group
end

-- Cancel the chain steps from `next_id` on that have not ended.
local function cancel_successors(next_id, why, upstream_failed)
  local cursor = next_id
  while cursor ~= '' do
    local state, _, _, _, _, _, _, _, _, next_step, group = job(cursor)
    if not state then break end
    if state < SUCCEEDED then
      cancel_one(cursor, why, upstream_failed)
      if group ~= '' then member_ended(group) end
    end
    cursor = next_step
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
-- kind: s(ucceeded) payload=result, t: as s, the next chain step's trace context
-- becoming `at` (see with_trace), r(etry) payload=error at, z (snooze) at,
-- c(ancelled) payload=reason, f(ailed) payload=error; e: as r, for a lease that
-- expired (counted as such, not as a run). `id` is a string.
local function apply_resolution(id, attempt, kind, payload, at)
  local state, job_attempt, available_at, created_at, started_at, finished_at, priority,
    has_errors, upstream_failed, next_step, group, run, queue, texts = job(id)
  if state ~= RUNNING or job_attempt ~= tonumber(attempt) then return false end
  unlease(id, queue)
  if kind == 's' or kind == 't' then
    local packed_spec, input, _, err, unique_key = unpack_texts(texts)
    if has_errors == 1 then err = nil end
    local record = records[id]
    put(id, STATE_BYTE[SUCCEEDED] .. string.sub(record, AT_ATTEMPT, AT_FINISHED - 1)
      .. NOW_D .. string.sub(record, AT_PRIORITY, #record - #texts)
      .. pack_texts(packed_spec, input, payload, err, unique_key))
    moved(id, run, RUNNING, SUCCEEDED)
    ran(queue, 'succeeded', started_at)
    ended(id, has_errors == 1)
    if next_step ~= '' then release_pending(next_step, payload, kind == 't' and at or nil) end
    if group ~= '' then member_ended(group) end
  elseif kind == 'r' or kind == 'e' then
    available_at = math.max(tonumber(at), NOW)
    record_error(id, job_attempt, payload)
    local out_of_attempts = job_attempt >= max_attempts(texts)
    texts = with_text(texts, TEXT_ERROR, payload)
    if kind == 'e' then
      stat(queue, 'expired')
      if out_of_attempts then stat(queue, 'failed') end
    elseif out_of_attempts then
      ran(queue, 'failed', started_at)
    else
      ran(queue, 'retried', started_at)
    end
    if out_of_attempts then
      put(id, encode(FAILED, job_attempt, available_at, created_at, started_at, NOW,
        priority, 1, upstream_failed, next_step, group, run, queue, texts))
      moved(id, run, RUNNING, FAILED)
      redis.call('ZADD', P .. 'fail:' .. run, id, id)
      ended(id, true)
      job_ended(id, next_step, group, true)
    else
      put(id, encode(AVAILABLE, job_attempt, available_at, created_at, started_at,
        finished_at, priority, 1, upstream_failed, next_step, group, run, queue, texts))
      moved(id, run, RUNNING, AVAILABLE)
      make_available(id, queue, priority, available_at)
    end
  elseif kind == 'z' then
    available_at = math.max(tonumber(at), NOW)
    put(id, encode(AVAILABLE, job_attempt - 1, available_at, created_at, started_at,
      finished_at, priority, has_errors, upstream_failed, next_step, group, run, queue,
      texts))
    moved(id, run, RUNNING, AVAILABLE)
    make_available(id, queue, priority, available_at)
  elseif kind == 'c' then
    put(id, encode(CANCELLED, job_attempt, available_at, created_at, started_at, NOW,
      priority, has_errors, upstream_failed, next_step, group, run, queue,
      with_text(texts, TEXT_ERROR, payload)))
    moved(id, run, RUNNING, CANCELLED)
    ended(id, has_errors == 1)
    job_ended(id, next_step, group, false)
  else
    record_error(id, job_attempt, payload)
    ran(queue, 'failed', started_at)
    put(id, encode(FAILED, job_attempt, available_at, created_at, started_at, NOW,
      priority, 1, upstream_failed, next_step, group, run, queue,
      with_text(texts, TEXT_ERROR, payload)))
    moved(id, run, RUNNING, FAILED)
    redis.call('ZADD', P .. 'fail:' .. run, id, id)
    ended(id, true)
    job_ended(id, next_step, group, true)
  end
  return true
end

-- Mark runs that just finished (enqueueing their on-done job) or were reopened; apply
-- the buffered writes and the feed entry; then wake waiting reserves and feed readers.
-- Called once at the end of every script that changes jobs.
local function finish()
  flush_writes()
  local i = 1
  while i <= #touched_list do
    local run = touched_list[i]
    local r = run_key(run)
    flush_counts(run)
    local counters = redis.call('HMGET', r, 'total', 'succeeded', 'failed', 'cancelled',
      'fin', 'od')
    local total, succeeded, failed, cancelled, finished_at, has_on_done = unpack(counters)
    total = tonumber(total) or 0
    local done = (tonumber(succeeded) or 0) + (tonumber(failed) or 0)
      + (tonumber(cancelled) or 0)
    if total > 0 and done == total and not finished_at then
      redis.call('HSET', r, 'fin', NOW_S)
      redis.call('HINCRBY', r, 'finishes', 1)
      if has_on_done then
        local on_done = redis.call('HMGET', r, unpack(ON_DONE_FIELDS))
        local _, _, has_unique_key, unique_key = unpack(on_done)
        local hook_run = run .. '/done'
        ensure_run(hook_run)
        local existing = false
        if has_unique_key == '1' then
          existing = redis.call('HGET', P .. 'uq:' .. hook_run, unique_key)
        end
        if not existing then
          insert(hook_run, on_done, AVAILABLE, redis.call('INCR', P .. 'seq:job'), nil, nil)
        end
      end
      -- The run's keys get their TTL after its last buffered write.
      flush_writes()
      keep_run(run, true)
    elseif done < total and finished_at then
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
