-- Prepended to enqueue.lua (scripts.rs): a commit (Backend::commit), a completion with
-- the records it writes, the gates it arrives at and the jobs it enqueues, all in this
-- one script or nothing. A script cannot roll back, so whatever can refuse the commit
-- is checked before anything is written: the specs and record keys by the caller
-- (commit.rs), then here the completion's lease and every record's version.
-- ARGV from A:
--   has a completion ('1'/'0'), then its COMPLETION_ARGS when it has (complete.lua's)
--   record count n, then n times: key, expected version (0: absent), value, ended
--     ('1': the record expires after the retention, KEEP; '0': it is kept)
--   arrival count m, then m gate ids
--   has an enqueue ('1'/'0'), then enqueue.lua's arguments when it has
-- Returns { 'stale' } (nothing applied); { 'conflict', index of the write (1-based),
-- version found } (nothing applied); else enqueue.lua's reply ({} without an enqueue).
--
-- A record is the hash `P rec:<key>`: `v` its version (1 after the first write, one
-- more at each), `d` its value. A record written ended expires after the retention,
-- as a finished run's keys do; one written again without it is kept again.
do
  local COMPLETION_ARGS = 5
  local at = A
  local completion = nil
  if ARGV[at] == '1' then
    completion = at + 1
    at = at + 1 + COMPLETION_ARGS
  else
    at = at + 1
  end
  -- The test apply_resolution makes, before anything is written.
  if completion then
    local state, attempt = job(ARGV[completion])
    if state ~= RUNNING or attempt ~= tonumber(ARGV[completion + 1]) then
      return { 'stale' }
    end
  end
  -- Every version is checked first; a key written twice in one commit is checked the
  -- second time against the version its first write makes.
  local n = tonumber(ARGV[at])
  local first_write = at + 1
  local versions, written = {}, {}
  for w = 1, n do
    local i = first_write + (w - 1) * 4
    local key = P .. 'rec:' .. ARGV[i]
    local found = versions[key]
    if found == nil then found = tonumber(redis.call('HGET', key, 'v') or '0') end
    if found ~= tonumber(ARGV[i + 1]) then return { 'conflict', S(w), S(found) } end
    versions[key] = found + 1
    written[w] = found + 1
  end
  at = first_write + n * 4
  -- Nothing can refuse the commit now.
  if completion then
    apply_resolution(unpack(ARGV, completion, completion + COMPLETION_ARGS - 1))
  end
  for w = 1, n do
    local i = first_write + (w - 1) * 4
    local key = P .. 'rec:' .. ARGV[i]
    redis.call('HSET', key, 'v', S(written[w]), 'd', ARGV[i + 2])
    if ARGV[i + 3] == '1' then
      redis.call('EXPIRE', key, KEEP)
    else
      redis.call('PERSIST', key)
    end
  end
  local m = tonumber(ARGV[at])
  for g = at + 1, at + m do arrive(ARGV[g]) end
  at = at + 1 + m
  if ARGV[at] ~= '1' then
    finish()
    return {}
  end
  A = at + 1
end
