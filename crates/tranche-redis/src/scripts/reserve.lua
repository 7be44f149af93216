-- Lease up to `max` ready jobs of a queue, after recovering expired leases (of every
-- queue) and promoting the queue's scheduled jobs that are due. ARGV from A: queue,
-- max, lease_until. Returns 6 values per job (id, run, spec (kind, max attempts and
-- args, packed), input, attempt, available_at), or, when none was ready, one value:
-- when the next scheduled job of the queue is due, or when a start rate next lets one
-- start ('' when there is none, or when the queue is paused).
local queue, max, lease_until = ARGV[A], tonumber(ARGV[A + 1]), ARGV[A + 2]
-- Bounded per call so one reserve never blocks the server for long; the rest are
-- recovered by the next reserves.
local BOUND = 1000

local expired = redis.call('ZRANGEBYSCORE', P .. 'leased', '-inf', '(' .. NOW_S, 'LIMIT', 0, BOUND)
load(expired)
for _, id in ipairs(expired) do
  local state, attempt = job(id)
  if state == RUNNING then
    apply_resolution(id, attempt, 'e',
      'lease expired: the worker running attempt ' .. attempt .. ' stopped heartbeating',
      NOW_S)
  else
    lease(id, false)
  end
end

-- A paused queue leases nothing (see pause_queue.lua); expired leases of every queue
-- were still recovered above. No due time: waiters sleep until the resume wakes them.
if redis.call('SISMEMBER', P .. 'paused', queue) == 1 then
  finish()
  return { '' }
end

local qr, qs = P .. 'qr:' .. queue, P .. 'qs:' .. queue
local due = redis.call('ZRANGEBYSCORE', qs, '-inf', NOW_S, 'LIMIT', 0, BOUND)
call_chunked('ZREM', qs, due)
load(due)
for _, id in ipairs(due) do
  local state, _, available_at, _, _, _, priority = job(id)
  if state == AVAILABLE then set_ready(queue, ready_member(available_at, id), priority) end
end
-- Jobs made ready above (expired leases retried, scheduled ones due) are popped too.
flush_ready()

local out = {}
local ids = {}
-- Limits (limits.lua): one HMGET says whether any applies; without, the bulk path.
local limited = redis.call('HMGET', P .. 'lim', 'q:' .. queue, '#k')
local qlimit, klimits = limited[1], limited[2] ~= false
-- Starts to record per limited kind, and when a kind at its limit has room again.
local kind_starts, kind_next = {}, nil
if qlimit then
  local queue_running = tonumber(redis.call('HGET', P .. 'qrun', queue) or '0')
    + (running[queue] or 0)
  local room, next_free = limit_budget('q:' .. queue, qlimit, queue_running)
  if room == 0 then
    finish()
    if next_free then return { S(next_free) } end
    return { '' }
  end
  if room < max then max = room end
end
if klimits then
  -- Jobs of a kind at its limit are skipped, left ready where they are (no attempt
  -- used); the ones behind them are taken. A bounded scan: at most SCAN members.
  -- Pages are sized to the jobs still wanted, growing by what was scanned so far (the
  -- skipped), up to 200: each member's record is loaded, and fixed pages of 200 made
  -- every reserve of a few jobs load 200 records once any kind had a limit (an upload
  -- pacing is one).
  local SCAN = math.max(BOUND, 2 * max)
  local room_of, members, from = {}, {}, 0
  while #ids < max and from < SCAN do
    local size = math.min(200, max - #ids + 8 + from)
    local page = redis.call('ZRANGE', qr, from, from + size - 1)
    if #page == 0 then break end
    local pids = {}
    for i, m in ipairs(page) do pids[i] = string.sub(m, MEMBER_ID) end
    load(pids)
    for i, id in ipairs(pids) do
      if #ids >= max then break end
      local take = true
      local texts = select(14, job(id))
      if texts then
        local kind = spec_kind(unpack_texts(texts))
        local klimit = kind_limit(kind)
        if klimit then
          local left = room_of[kind]
          if left == nil then
            local next_free
            left, next_free = limit_budget('k:' .. kind, klimit,
              tonumber(redis.call('HGET', P .. 'krun', kind) or '0'))
            kind_next = earliest(kind_next, next_free)
          end
          if left == 0 then take = false else left = left - 1 end
          room_of[kind] = left
        end
      end
      if take then
        ids[#ids + 1] = id
        members[#members + 1] = page[i]
      end
    end
    from = from + #page
  end
  call_chunked('ZREM', qr, members)
else
  local popped = redis.call('ZPOPMIN', qr, max)
  for p = 1, #popped, 2 do ids[#ids + 1] = string.sub(popped[p], MEMBER_ID) end
  load(ids)
end
-- The queue's statistics: attempts started, and the wait of each (runnable to now),
-- tallied into the current bucket while it holds them (see common.lua).
local started, waited = 0, 0
-- The current bucket: bounds (lower exclusive), field and the waits tallied in it.
local lo, hi, wait_field, in_bucket = 1, 0, nil, 0
local qstat = queue_stats(queue)
for _, id in ipairs(ids) do
  local state, attempt, available_at, _, _, _, _, _, _, _, _, run, _, texts = job(id)
  if state == AVAILABLE then
    attempt = attempt + 1
    local record = records[id]
    put(id, struct.pack('<BI4', RUNNING, attempt)
      .. string.sub(record, AT_AVAILABLE, AT_STARTED - 1) .. NOW_D
      .. string.sub(record, AT_FINISHED))
    take_lease(id, queue, lease_until)
    moved(id, run, AVAILABLE, RUNNING)
    local us = NOW - available_at
    if us < 0 then us = 0 end
    if us > hi or us <= lo then
      if in_bucket > 0 then qstat[wait_field] = (qstat[wait_field] or 0) + in_bucket end
      local b = bucket(us)
      lo, hi, wait_field, in_bucket = BOUNDS[b - 1], BOUNDS[b], WAIT_F[b], 0
    end
    started, waited, in_bucket = started + 1, waited + us, in_bucket + 1
    local packed_spec, input = unpack_texts(texts)
    if klimits then
      local kind = spec_kind(packed_spec)
      local klimit = kind_limit(kind)
      if klimit then
        redis.call('HINCRBY', P .. 'krun', kind, 1)
        if limit_parse(klimit) then kind_starts[kind] = (kind_starts[kind] or 0) + 1 end
      end
    end
    local row = #out
    -- Attempt and available_at go back as integers; false, not nil, for no input: a
    -- nil would end the reply's array there.
    out[row + 1], out[row + 2], out[row + 3] = id, run, packed_spec
    out[row + 4], out[row + 5], out[row + 6] = input or false, attempt, available_at
  end
end
if started > 0 then
  qstat[wait_field] = (qstat[wait_field] or 0) + in_bucket
  qstat.started = (qstat.started or 0) + started
  qstat.ws = (qstat.ws or 0) + waited
end
if started > 0 then
  if qlimit and limit_parse(qlimit) then limit_record('q:' .. queue, started) end
  for kind, n in pairs(kind_starts) do limit_record('k:' .. kind, n) end
end
if #out == 0 then
  local next_at = redis.call('ZRANGE', qs, 0, 0, 'WITHSCORES')
  local due = kind_next
  if next_at[2] then due = earliest(due, tonumber(next_at[2])) end
  if due then out[1] = S(due) else out[1] = '' end
end
finish()
return out
