-- Hand running jobs back without counting the attempt. ARGV from A, 2 per lease:
-- job, attempt. Returns how many were released.
local released = 0
local i = A
while i <= #ARGV do
  local id, attempt = ARGV[i], tonumber(ARGV[i + 1])
  local st, att, _, cr, sa, fi, pr, ne, uf, nx, gr, run, q, tx = job(id)
  if st == RUNNING and att == attempt then
    unlease(id, q)
    put(id, encode(AVAILABLE, att - 1, NOW, cr, sa, fi, pr, ne, uf, nx, gr, run, q, tx))
    moved(id, run, RUNNING, AVAILABLE)
    make_available(id, q, pr, NOW)
    released = released + 1
  end
  i = i + 2
end
finish()
return released
