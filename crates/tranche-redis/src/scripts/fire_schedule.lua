-- Prepended to enqueue.lua (scripts.rs): claim a schedule's due time, then enqueue in
-- the same script, so a due time is enqueued exactly once however many processes
-- race. ARGV from A: name, due (µs), '1' to enqueue ('0': a skipped due time), then
-- enqueue.lua's arguments. Returns { 'lost' } when the due time (or a later one) was
-- already handled or there is no such schedule; otherwise enqueue.lua's reply ({}
-- when skipped).
local schedule_key = P .. 'sch:' .. ARGV[A]
local through = redis.call('HGET', schedule_key, 'through')
if not through or tonumber(through) >= tonumber(ARGV[A + 1]) then return { 'lost' } end
redis.call('HSET', schedule_key, 'through', ARGV[A + 1])
if ARGV[A + 2] ~= '1' then return {} end
redis.call('HSET', schedule_key, 'fired', ARGV[A + 1])
A = A + 3
