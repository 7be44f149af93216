-- Rate limits and running caps (see Backend::put_limit), prepended to the scripts
-- that apply or read them. Keys (scope: 'q:<queue>' or 'k:<kind>'):
--   P lim          hash: scope -> 'count|per_us|running' (a part empty when unset);
--                  '#k' -> how many kinds have a limit (absent at 0), so that the
--                  reserve of a queue learns with one HMGET whether limits apply.
--   P lw:<scope>   list, oldest first, of 'at|n' (µs|starts), one per granting
--                  reserve within the last window; expired entries are popped by the
--                  next reserve of the scope.
--   P lsum         hash: scope -> the sum of n in its list.
--   P krun         hash: kind -> its running jobs, kept while the kind has a limit
--                  (see unlease in common.lua); a queue's are `P qrun`.
-- None of these expire: a limit lives until deleted, which removes its keys.

local function limit_parse(packed)
  local c, p, r = string.match(packed, '^(%d*)|(%d*)|(%d*)$')
  return tonumber(c), tonumber(p), tonumber(r)
end

local function limit_entry(e)
  local at, n = string.match(e, '^(%-?%d+)|(%d+)$')
  return tonumber(at), tonumber(n)
end

-- Starts within the window ending now (expired entries dropped) and, when the window
-- is full, when it next has room: once enough of its oldest starts have aged out.
local function limit_window(scope, count, per)
  local key = P .. 'lw:' .. scope
  local cutoff = NOW - per
  local used = tonumber(redis.call('HGET', P .. 'lsum', scope) or '0')
  local dropped = 0
  while true do
    local head = redis.call('LINDEX', key, 0)
    if not head then break end
    local at, n = limit_entry(head)
    if at > cutoff then break end
    redis.call('LPOP', key)
    dropped = dropped + n
  end
  if dropped > 0 then
    used = used - dropped
    redis.call('HINCRBY', P .. 'lsum', scope, -dropped)
  end
  if used < count then return used, nil end
  local left, from = used, 0
  while true do
    local page = redis.call('LRANGE', key, from, from + 99)
    if #page == 0 then return used, nil end
    for _, e in ipairs(page) do
      local at, n = limit_entry(e)
      left = left - n
      if left < count then return used, at + per end
    end
    from = from + #page
  end
end

-- How many of the scope's jobs may start now and, when none may because of its start
-- rate, when one may (nil: only a job leaving running frees one).
local function limit_budget(scope, packed, running_now)
  local count, per, cap = limit_parse(packed)
  local free = math.huge
  if cap then free = math.max(cap - running_now, 0) end
  if count then
    local used, next_free = limit_window(scope, count, per)
    local by_rate = math.max(count - used, 0)
    if by_rate < free then free = by_rate end
    if by_rate == 0 then return 0, next_free end
  end
  return free, nil
end

local function limit_record(scope, n)
  redis.call('RPUSH', P .. 'lw:' .. scope, NOW_S .. '|' .. S(n))
  redis.call('HINCRBY', P .. 'lsum', scope, n)
end

local function earliest(a, b)
  if a == nil then return b end
  if b == nil then return a end
  return math.min(a, b)
end
