-- Apply a batch of attempt results. ARGV from A, 5 per completion: job, attempt,
-- kind (s, r, z, c, f), payload, at. Returns '1' (applied) or '0' (stale) for each.
local ids = {}
for i = A, #ARGV, 5 do ids[#ids + 1] = ARGV[i] end
load(ids)
local out = {}
local i = A
while i <= #ARGV do
  local ok = apply_resolution(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
  out[#out + 1] = ok and '1' or '0'
  i = i + 5
end
finish()
return out
