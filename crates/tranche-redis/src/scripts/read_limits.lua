-- Every limit and its use now, read only. Returns 4 values per limit: scope, the
-- packed limit, running jobs, starts within the window ending now.
local all = redis.call('HGETALL', P .. 'lim')
local out = {}
for i = 1, #all, 2 do
  local scope, packed = all[i], all[i + 1]
  if scope ~= '#k' then
    local count, per = limit_parse(packed)
    local kind = string.match(scope, '^k:(.*)$')
    local running_now
    if kind then
      running_now = redis.call('HGET', P .. 'krun', kind)
    else
      running_now = redis.call('HGET', P .. 'qrun', string.sub(scope, 3))
    end
    local in_window = 0
    if count then
      in_window = tonumber(redis.call('HGET', P .. 'lsum', scope) or '0')
      local from, done = 0, false
      while not done do
        local page = redis.call('LRANGE', P .. 'lw:' .. scope, from, from + 99)
        if #page == 0 then break end
        for _, e in ipairs(page) do
          local at, n = limit_entry(e)
          if at > NOW - per then
            done = true
            break
          end
          in_window = in_window - n
        end
        from = from + #page
      end
    end
    out[#out + 1] = scope
    out[#out + 1] = packed
    out[#out + 1] = tonumber(running_now or '0')
    out[#out + 1] = in_window
  end
end
return out
