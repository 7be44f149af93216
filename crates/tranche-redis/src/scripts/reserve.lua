-- Lease up to `max` ready jobs of a queue, after recovering expired leases (of every
-- queue) and promoting the queue's scheduled jobs that are due. ARGV from A: queue,
-- max, lease_until. Returns 6 values per job (id, run, d (kind, max attempts and args,
-- packed), input, attempt, available_at), or, when none was ready, one value: when the next
-- scheduled job of the queue is due ('' when there is none).
local queue, max, lease_until = ARGV[A], tonumber(ARGV[A + 1]), ARGV[A + 2]
-- Bounded per call so one reserve never blocks the server for long; the rest are
-- recovered by the next reserves.
local BOUND = 1000

local expired = redis.call('ZRANGEBYSCORE', P .. 'leased', '-inf', '(' .. NOW_S, 'LIMIT', 0, BOUND)
for _, id in ipairs(expired) do
  local att = redis.call('HGET', jk(id), 'att')
  if att then
    apply_resolution(id, att, 'r',
      'lease expired: the worker running attempt ' .. att .. ' stopped heartbeating', NOW_S)
  else
    lease(id, false)
  end
end

local qr, qs = P .. 'qr:' .. queue, P .. 'qs:' .. queue
local due = redis.call('ZRANGEBYSCORE', qs, '-inf', NOW_S, 'LIMIT', 0, BOUND)
call_chunked('ZREM', qs, due)
for _, id in ipairs(due) do
  local v = redis.call('HMGET', jk(id), 'pr', 'av', 'st')
  if tonumber(v[3]) == AVAILABLE then
    set_ready(queue, ready_member(tonumber(v[2]), id), v[1] or '0')
  end
end
-- Jobs made ready above (expired leases retried, scheduled ones due) are popped too.
flush_ready()

local out = {}
local popped = redis.call('ZPOPMIN', qr, max)
for p = 1, #popped, 2 do
  local id = string.sub(popped[p], MEMBER_ID)
  local k = jk(id)
  local v = redis.call('HMGET', k, 'st', 'run', 'd', 'in', 'att', 'av')
  if tonumber(v[1]) == AVAILABLE then
    local att = (tonumber(v[5]) or 0) + 1
    local att_s = N(att)
    redis.call('HSET', k, 'st', ST[RUNNING], 'att', att_s, 'sa', NOW_S)
    take_lease(id, queue, lease_until)
    moved(id, v[2], AVAILABLE, RUNNING)
    local n = #out
    out[n + 1], out[n + 2], out[n + 3] = id, v[2], v[3]
    out[n + 4], out[n + 5], out[n + 6] = v[4], att_s, v[6]
  end
end
if #out == 0 then
  local next_at = redis.call('ZRANGE', qs, 0, 0, 'WITHSCORES')
  if next_at[2] then out[1] = S(tonumber(next_at[2])) else out[1] = '' end
end
finish()
return out
