-- Read jobs for the API (a job's detail, a run's failures): ARGV from A, job ids.
-- Returns 16 values per id, false where unset (all false: no such job): state,
-- attempt, available_at, created, started, finished, priority, next step, group,
-- run, queue, then the texts d (kind, max attempts, args packed), input, result,
-- last error and unique key.
local ids = {}
for i = A, #ARGV do ids[#ids + 1] = ARGV[i] end
load(ids)
local out = {}
-- Numbers as decimal strings, 0 and '' as unset.
local function put_out(v)
  if v == '' or v == 0 then v = false elseif type(v) == 'number' then v = S(v) end
  out[#out + 1] = v
end
for _, id in ipairs(ids) do
  local st, att, av, cr, sa, fi, pr, _, _, nx, gr, run, q, tx = job(id)
  if st then
    -- State and attempt 0 are values, not unset.
    out[#out + 1] = S(st)
    out[#out + 1] = S(att)
    for _, v in ipairs({ av, cr, sa, fi }) do put_out(v) end
    out[#out + 1] = S(pr)
    for _, v in ipairs({ nx, gr, run, q }) do put_out(v) end
    local d, i, r, e, u = texts(tx)
    for _, v in ipairs({ d or false, i or false, r or false, e or false, u or false }) do
      out[#out + 1] = v
    end
  else
    for _ = 1, 16 do out[#out + 1] = false end
  end
end
return out
