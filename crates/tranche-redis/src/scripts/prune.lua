-- Retention on demand: remove runs that finished before a cut-off, with their jobs
-- (their fields in the buckets, attempt errors, groups, the counts of gates that never
-- opened) and every key of the run (RUN_KEYS) and its `P runs` entry. What the
-- retention's key expiry does, earlier. Effects, statistics, records (those written
-- ended go by their own expiry) and the feed (bounded by length) are kept.
--
-- Bounded per call: it looks at up to SCAN entries of `P runs` from ARGV[A + 1] (a
-- position), removes up to ARGV[A + 2] runs and up to ARGV[A + 3] job ids; a large
-- run is removed over several calls, its id ranges consumed from the front, the run's
-- own keys with its last jobs. `P runs` is in creation order, so the first run created
-- at or after the cut-off ends the look. ARGV[A]: the cut-off (µs).
-- Returns { runs removed, jobs removed, next position, 1 when nothing is left to look at }.
local before = tonumber(ARGV[A])
local at = tonumber(ARGV[A + 1])
local max_runs = tonumber(ARGV[A + 2])
local budget = tonumber(ARGV[A + 3])
local SCAN = 200

local runs_removed, jobs_removed = 0, 0

-- Remove the run's jobs, range by range, while the budget lasts; true when none is
-- left.
local function remove_jobs(run)
  local ids_key = P .. 'ids:' .. run
  while budget > 0 do
    local range = redis.call('LINDEX', ids_key, 0)
    if not range then return true end
    local first, last = string.match(range, '^(%d+)-(%d+)$')
    first, last = tonumber(first), tonumber(last)
    local stop = math.min(last, first + budget - 1)
    local ids = {}
    for m = first, stop do ids[#ids + 1] = S(m) end
    load(ids)
    local fields, groups = {}, {}
    for _, id in ipairs(ids) do
      local state, _, _, _, _, _, _, has_errors, _, _, group = job(id)
      if state then
        local b = bucket_key(id)
        local l = fields[b]
        if not l then
          l = {}
          fields[b] = l
        end
        l[#l + 1] = id
        -- A gate of a cancelled workflow never opens: its count goes with its job.
        l[#l + 1] = gate_field(id)
        if has_errors == 1 then redis.call('DEL', errors_key(id)) end
        if group ~= '' then groups[group] = true end
        jobs_removed = jobs_removed + 1
      end
    end
    for b, l in pairs(fields) do call_chunked('HDEL', b, l) end
    for group in pairs(groups) do
      redis.call('DEL', P .. 'g:' .. group, P .. 'gm:' .. group)
    end
    records = {}
    budget = budget - (stop - first + 1)
    if stop == last then
      redis.call('LPOP', ids_key)
    else
      redis.call('LSET', ids_key, 0, S(stop + 1) .. '-' .. S(last))
    end
  end
  return redis.call('EXISTS', ids_key) == 0
end

local names = redis.call('ZRANGE', P .. 'runs', at, at + SCAN - 1)
local finished_looking = #names < SCAN
for _, run in ipairs(names) do
  if runs_removed >= max_runs or budget <= 0 then
    finished_looking = false
    break
  end
  local fin, created, pending, available, running = unpack(redis.call('HMGET', run_key(run),
    'fin', 'created', 'pending', 'available', 'running'))
  if not created then
    -- Its data already expired after the retention: only this entry was left.
    redis.call('ZREM', P .. 'runs', run)
  elseif tonumber(created) >= before then
    finished_looking = true
    break
  elseif fin and tonumber(fin) < before and tonumber(pending) == 0
      and tonumber(available) == 0 and tonumber(running) == 0 then
    if remove_jobs(run) then
      for _, k in ipairs(RUN_KEYS) do redis.call('DEL', P .. k .. run) end
      redis.call('ZREM', P .. 'runs', run)
      runs_removed = runs_removed + 1
    else
      finished_looking = false
      break
    end
  else
    at = at + 1
  end
end
return { runs_removed, jobs_removed, at, finished_looking and 1 or 0 }
