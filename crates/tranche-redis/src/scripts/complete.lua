-- Apply a batch of attempt results. ARGV from A, COMPLETION_ARGS per completion: job,
-- attempt, kind (s, t, r, z, c, f), payload, at (see `apply_resolution`). Returns '1'
-- (applied) or '0' (stale) for each.
local COMPLETION_ARGS = 5
local ids = {}
for i = A, #ARGV, COMPLETION_ARGS do ids[#ids + 1] = ARGV[i] end
load(ids)
local out = {}
local i = A
while i <= #ARGV do
  local ok = apply_resolution(unpack(ARGV, i, i + COMPLETION_ARGS - 1))
  out[#out + 1] = ok and '1' or '0'
  i = i + COMPLETION_ARGS
end
finish()
return out
