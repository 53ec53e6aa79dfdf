-- adjust: settle a true cost after the response (delta > 0 charges, < 0 refunds).
-- Mirrors limit::adjust in src/limit/algorithm.cpp; debt is bounded by one capacity/limit.
-- keys      the state key, then `<key>:leases` for a leased limit
-- args      (ignored: the time slot, clock.lua), algorithm, capacity, per_second, window_us, delta, then for a
--           leased limit: holder (the instance's id), settled (units of its leases it spent
--           since it last said so), returning ("1": the delta is unused leased units going
--           back, no longer held)
local function adjust(keys, args)
  local now = clock(args[1])
  local key = keys[1]
  local algo, cap, rate, window, delta = -- a quota's window: its periods (acquire.lua)
    num(args[2]), num(args[3]), num(args[4]), num(args[5]) or args[5], num(args[6])
  local holder = args[7] or ''
  local held = 0 -- what leases hold on a token_bucket or gcra key: never refilled
  if holder ~= '' and algo <= 1 then
    local own, own_until
    held, own, own_until = leases_of(now, key, keys[2], holder, algo, cap, rate)
    local freed = num(args[8])
    if args[9] == '1' then freed = freed - delta end
    freed = min(own, freed)
    if freed > 0 then
      held, own = held - freed, own - freed
      set_lease(now, keys[2], holder, own, own_until)
    end
  end

  if algo == 3 or algo == 5 then return 1 end -- a log entry or a lease is removed instead
  local raw = call('GET', key)
  local x, y, z, exp = 0, 0, 0, 0
  if raw then x, y, z, exp = read_state(raw) end
  if algo == 0 then
    local tokens, updated = cap - held, now
    if raw then
      tokens = min(cap - held, x + max(0, now - y) * rate / US)
      updated = max(now, y)
    end
    tokens = min(cap - held, max(-cap - window, tokens - delta)) -- window: delay allowance
    write_state(now, key, tokens, updated, 0, time_to(cap - tokens, rate), exp)
  elseif algo == 1 then
    local debt = 0
    if raw then debt = max(0, x - max(0, now - y) * rate / US) end
    debt = min(2 * cap + window, max(held, debt + delta))
    write_state(now, key, debt, now, 0, time_to(debt, rate), exp)
  elseif algo == 2 or algo == 4 or algo == 6 then
    local start, stop
    if algo == 6 then
      start, stop = period_of(now, window)
    else
      start = floor_to(now, window)
      stop = start + window
    end
    local s, c, p = start, 0, 0
    if raw then
      if algo == 2 then
        if x == start - window then s, c, p = start, 0, y
        elseif x >= start then s, c, p = x, y, z end
      elseif x == start then
        c = y
      end
    end
    c = min(2 * cap, max(0, c + delta))
    local ttl = 0
    if algo == 2 then
      if c > 0 then ttl = s + 2 * window - now elseif p > 0 then ttl = s + window - now end
    elseif c > 0 then
      ttl = stop - now
    end
    write_state(now, key, s, c, p, ttl, exp)
  end
  return 1
end
