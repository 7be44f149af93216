-- Read jobs for the API (a job's detail, a run's failures): ARGV from A, job ids.
-- Returns 16 values per id, false where unset (all false: no such job): state,
-- attempt, available_at, created_at, started_at, finished_at, priority, next step,
-- group, run, queue, then the texts spec (kind, max attempts and args, packed), input,
-- result, last error and unique key (read.rs names them: `Column`).
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
  local state, attempt, available_at, created_at, started_at, finished_at, priority, _, _,
    next_step, group, run, queue, texts = job(id)
  if state then
    -- State and attempt 0 are values, not unset.
    out[#out + 1] = S(state)
    out[#out + 1] = S(attempt)
    for _, v in ipairs({ available_at, created_at, started_at, finished_at }) do
      put_out(v)
    end
    out[#out + 1] = S(priority)
    for _, v in ipairs({ next_step, group, run, queue }) do put_out(v) end
    local packed_spec, input, result, err, unique_key = unpack_texts(texts)
    local texts_out = { packed_spec or false, input or false, result or false, err or false,
      unique_key or false }
    for _, v in ipairs(texts_out) do out[#out + 1] = v end
  else
    for _ = 1, 16 do out[#out + 1] = false end
  end
end
return out
