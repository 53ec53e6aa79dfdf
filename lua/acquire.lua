-- acquire: the decisions of one or more requests, in order, each deciding all of its limits
-- atomically with Redis's own clock. Mirrors src/limit/algorithm.cpp line for line; a
-- differential test holds both to the same table of cases. Per request: check every enforcing
-- limit; only if all admit, charge them all (a shadow limit is charged when it admits and
-- never refuses). Requests a proxy had waiting in one loop turn come as one call.
--
-- keys      per request, per item: its state key, then `<key>:leases` when it has a holder
-- args[1]   ignored: decisions are at Redis's TIME (clock.lua; the tests' library reads a time here)
-- args[2..] per request: its lease id (concurrency items), its item count n, then per item:
--           algorithm, capacity, per_second, window_us, cost, enforce, holder (a leasing
--           instance's id, "" otherwise), and only when it has a holder three more:
--           take_up_to (> 0: take as many free units as that, provided cost are), settled
--           (units of its earlier leases it has spent since it last said so), lease_ttl_us
--           algorithm: 0 token_bucket, 1 gcra, 2 sliding_window, 3 sliding_log,
--                      4 fixed_window, 5 concurrency, 6 quota (window_us: its periods,
--                      "b0 b1 b2 b3", see period_of)
-- returns   { now, then per request: all_admitted, then per item: admitted, remaining,
--           reset_after_us, retry_after_us, and for an item with a holder what it took }
--           (a limit's capacity, and what an item without a holder took, the caller knows).
--           retry_after_us of an admitted item with nothing remaining is when the same
--           request would pass again (0: at once). A request whose decision raised an error
--           (a key of another type, say) answers -1, the error, then zeros to its usual
--           length; the requests around it are decided as usual.
local CONCURRENCY_LEASE_US = 3600 * US

local function floor_to(t, w) return t - (t % w) end
-- A sliding_log entry's member, "<lease>:<now>:<cost>" with integer digits: a cross-slot refund
-- (script_calls.cpp, log_member) spells the same member to ZREM it. Lua's own number-to-string
-- would write now (16 digits) in exponent form with 14 significant digits.
local function log_member(lease, t, cost) return format('%s:%d:%d', lease, t, cost) end

-- Each evaluator returns: admitted, remaining, reset_after, retry_after, and for an admission
-- the state commit() writes: three numbers, when it is neutral (µs from now; 0: DEL the key)
-- and the key's expiry now (write_state). No state (nil): nothing to write, or (sliding_log,
-- concurrency) commit() writes it. `held`: units leases hold (token_bucket, gcra; else 0).
-- token_bucket and gcra: `window` is the delay allowance (on_exceed: delay; 0: refuse): units
-- a request may take beyond what is there, admitted with the delay until they have refilled,
-- answered in retry_after's place (the store maps it to the decision's delay).
local function token_bucket(now, key, cap, rate, window, cost, held)
  local room = cap - held -- what is held cannot refill: the burst stays within capacity
  local tokens, updated, exp = room, now, 0
  local raw = call('GET', key)
  if raw then
    local _
    tokens, updated, _, exp = read_state(raw)
    local elapsed = max(0, now - updated)
    tokens = min(room, tokens + elapsed * rate / US)
    updated = max(now, updated)
  end
  if tokens + window + 1e-9 >= cost then
    local left = tokens - cost
    local reset = time_to(cap - left, rate)
    local delay = 0
    if left < 0 then delay = time_to(-left, rate) end
    return 1, max(0, floor(left + 1e-9)), reset, delay, left, updated, 0, reset, exp
  end
  return 0, 0, time_to(cap - tokens, rate), max(1, time_to(cost - window - tokens, rate))
end

local function gcra(now, key, cap, rate, window, cost, held) -- kept as debt (algorithm.hpp)
  local debt, exp = 0, 0
  local raw = call('GET', key)
  if raw then
    local a, b, _
    a, b, _, exp = read_state(raw)
    debt = max(0, a - max(0, now - b) * rate / US)
  end
  debt = max(debt, held) -- what is held does not decay
  local nxt = debt + cost
  if nxt <= cap + window + 1e-9 then
    local reset = time_to(nxt, rate)
    local delay = 0
    if nxt > cap + 1e-9 then delay = time_to(nxt - cap, rate) end
    return 1, max(0, floor(cap - nxt + 1e-9)), reset, delay, nxt, now, 0, reset, exp
  end
  return 0, 0, time_to(debt, rate), max(1, time_to(nxt - cap - window, rate))
end

-- "start count previous" of the window holding now; and the key's expiry.
local function read_window(key, start, window)
  local raw = call('GET', key)
  if not raw then return start, 0, 0, 0 end
  local s, c, p, exp = read_state(raw)
  if s < start - window then return start, 0, 0, exp end
  if s == start - window then return start, 0, c, exp end
  return s, c, p, exp
end

local function window_reset(now, s, c, p, window)
  if c > 0 then return s + 2 * window - now end
  if p > 0 then return s + window - now end
  return 0
end

local function sliding_window(now, key, limit, rate, window, cost)
  local s, c, p, exp = read_window(key, floor_to(now, window), window)
  local elapsed = min(1, max(0, (now - s) / window))
  local estimate = p * (1 - elapsed) + c
  if estimate + cost <= limit + 1e-9 then
    c = c + cost
    local reset = window_reset(now, s, c, p, window)
    return 1, max(0, floor(limit - estimate - cost + 1e-9)), reset, 0,
           s, c, p, max(1, reset), exp
  end
  local retry
  local room = limit - c - cost
  if room >= 0 and p > 0 then
    local at = s + ceil_us(window * (1 - room / p))
    if at < s + window then retry = max(at - now, 1) end
  end
  if not retry then
    local e = 0
    if c > 0 then e = window * max(0, 1 - (limit - cost) / c) end
    retry = max(s + window + ceil_us(e) - now, 1)
  end
  return 0, 0, window_reset(now, s, c, p, window), retry
end

local function sliding_log(now, key, limit, rate, window, cost) -- sorted set: score = time
  call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local entries = call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local count = 0
  for i = 1, #entries, 2 do count = count + num(match(entries[i], ':(%d+)$')) end
  local newest = nil
  if #entries > 0 then newest = num(entries[#entries]) end
  if count + cost <= limit then
    local reset = 0
    if cost > 0 then reset = window elseif newest then reset = newest + window - now end
    return 1, limit - count - cost, reset, 0, nil, window
  end
  local excess = count + cost - limit
  local retry = 0
  for i = 1, #entries, 2 do
    excess = excess - num(match(entries[i], ':(%d+)$'))
    if excess <= 0 then retry = max(num(entries[i + 1]) + window - now, 1) break end
  end
  local reset = 0
  if newest then reset = newest + window - now end
  if retry == 0 then -- a cost above the limit never fits
    if newest then retry = max(1, newest + window - now) else retry = window end
  end
  return 0, 0, reset, retry
end

-- A fixed window [start, stop): fixed_window's, or a quota's calendar period.
local function fixed_span(now, key, limit, cost, start, stop)
  local count, exp = 0, 0
  local raw = call('GET', key)
  if raw then
    local s, c, _
    s, c, _, exp = read_state(raw)
    if s == start then count = c end
  end
  if count + cost <= limit then
    count = count + cost
    local reset = 0
    if count > 0 then
      reset = stop - now
      return 1, limit - count, reset, 0, start, count, 0, reset, exp
    end
    return 1, limit - count, reset, 0
  end
  local reset = 0
  if count > 0 then reset = stop - now end
  return 0, 0, reset, max(stop - now, 1)
end

local function fixed_window(now, key, limit, rate, window, cost)
  local start = floor_to(now, window)
  return fixed_span(now, key, limit, cost, start, start + window)
end

-- quota: the proxy sends the calendar periods around its own clock, "b0 b1 b2 b3" (µs: the
-- periods [b0, b1), [b1, b2), [b2, b3)), and Redis's clock picks the one holding now (a proxy
-- clock off by less than a period counts in Redis's period all the same). Algorithm.cpp
-- computes the same period from its own clock (src/calendar/period.cpp).
local function period_of(now, bounds)
  local b0, b1, b2, b3 = match(bounds, '^(-?%d+) (-?%d+) (-?%d+) (-?%d+)$')
  b0, b1, b2, b3 = num(b0), num(b1), num(b2), num(b3)
  -- Outside all three (clocks more than a period apart): whole periods of the nearest one's
  -- length counted on from it to the one holding now, so that the count still builds up and
  -- expires at that period's end (a period in the past would keep nothing: every request
  -- admitted; one in the future would be held too long).
  if now < b0 then
    local len = b1 - b0
    local start = b0 - ceil((b0 - now) / len) * len
    return start, start + len
  end
  if now < b1 then return b0, b1 end
  if now >= b3 then
    local len = b3 - b2
    local start = b3 + floor((now - b3) / len) * len
    return start, start + len
  end
  if now >= b2 then return b2, b3 end
  return b1, b2
end

local function quota(now, key, limit, rate, bounds, cost)
  local start, stop = period_of(now, bounds)
  return fixed_span(now, key, limit, cost, start, stop)
end

local function concurrency(now, key, limit) -- leases expire by themselves
  call('ZREMRANGEBYSCORE', key, '-inf', now)
  local in_flight = call('ZCARD', key)
  if in_flight + 1 <= limit then return 1, limit - in_flight - 1, 0, 0 end
  return 0, 0, 0, US
end

local evaluate = { [0] = token_bucket, gcra, sliding_window, sliding_log, fixed_window, concurrency,
                   quota }

local function commit(now, algo, key, lease, cost, window, a, b, c, ttl, exp)
  if algo == 3 then
    if cost > 0 then
      call('ZADD', key, now, log_member(lease, now, cost))
      call('PEXPIRE', key, ceil(window / 1000))
    end
  elseif algo == 5 then
    call('ZADD', key, now + CONCURRENCY_LEASE_US, lease)
    call('PEXPIRE', key, ceil(CONCURRENCY_LEASE_US / 1000))
  elseif a then
    write_state(now, key, a, b, c, ttl, exp)
  end
end

-- One item from args[a] (its key keys[k], and its leases' after it when it has a holder),
-- decided: the positions after it; its algorithm, capacity, rate, window, the cost it asked,
-- enforce, holder, key and leases' key; for a leasing holder what it holds now (its spent
-- units reported first: no longer held, and charged when leased) and until when; then what
-- it takes (a lease takes as many free units as up_to, provided cost are) and the
-- evaluator's answer.
local function decide_item(now, keys, k, args, a)
  local algo, cap, rate, window, cost = -- a quota's window: its periods, as text
    num(args[a]), num(args[a + 1]), num(args[a + 2]), num(args[a + 3]) or args[a + 3],
    num(args[a + 4])
  local enforce, holder = args[a + 5], args[a + 6]
  local key, hk, held, up_to, own, untl = keys[k], false, 0, 0, false, 0
  k, a = k + 1, a + 7
  if holder ~= '' then
    hk, up_to = keys[k], num(args[a])
    if algo <= 1 then
      local own_until
      held, own, own_until = leases_of(now, key, hk, holder, algo, cap, rate)
      local settled = min(own, num(args[a + 1]))
      if settled > 0 then
        held, own = held - settled, own - settled
        set_lease(now, hk, holder, own, own_until)
      end
      untl = max(now + num(args[a + 2]), own_until)
    end
    k, a = k + 1, a + 3
  end
  local eval = evaluate[algo]
  local take = cost
  if up_to > 0 then -- free units: what an admission of nothing would leave
    local _, free = eval(now, key, cap, rate, window, 0, held)
    take = max(cost, min(up_to, free))
  end
  return k, a, algo, cap, rate, window, cost, enforce, holder, key, hk, own, untl, take,
         eval(now, key, cap, rate, window, take, held)
end

-- An admitted item's writes: its state, and what a leasing holder now holds (until its until).
local function charge(now, algo, key, lease, cost, window, sa, sb, sc, ttl, exp, hk, holder,
                      own, untl)
  commit(now, algo, key, lease, cost, window, sa, sb, sc, ttl, exp)
  if own then set_lease(now, hk, holder, own + cost, untl) end
end

-- An admission that took the last unit also says when the same request (asked units) would
-- pass again (0: at once), so the proxy can refuse until then without asking.
local function again_after(now, algo, key, cap, rate, window, asked, hk, holder, own)
  local held = 0
  if own then held = leases_of(now, key, hk, holder, algo, cap, rate) end
  local ok, _, _, retry = evaluate[algo](now, key, cap, rate, window, asked, held)
  if ok == 0 then return retry end
  return 0
end

-- An item's answer at out[b + 1 ...]; returns its last position.
local function answer(out, b, holder, ok, remaining, reset, retry, cost)
  out[b + 1], out[b + 2], out[b + 3], out[b + 4] = ok, remaining, reset, retry
  if holder == '' then return b + 4 end
  if ok == 1 then out[b + 5] = cost else out[b + 5] = 0 end -- what a lease took
  return b + 5
end

-- A request of one item (most are): decided and written at once. Its answer goes to
-- out[o + 1 ...]; returns the next key and arg positions and its answer's last position.
local function decide_one(now, keys, k, args, a, lease, out, o)
  local nk, na, algo, cap, rate, window, asked, enforce, holder, key, hk, own, untl, cost,
        ok, remaining, reset, retry, sa, sb, sc, ttl, exp = decide_item(now, keys, k, args, a)
  if ok == 1 then
    charge(now, algo, key, lease, cost, window, sa, sb, sc, ttl, exp, hk, holder, own, untl)
    if remaining == 0 and algo ~= 5 and not (algo <= 1 and window > 0) then
      retry = again_after(now, algo, key, cap, rate, window, asked, hk, holder, own)
    end
  end
  if ok == 1 or enforce ~= '1' then out[o + 1] = 1 else out[o + 1] = 0 end
  return nk, na, answer(out, o + 1, holder, ok, remaining, reset, retry, cost)
end

-- A request of n items: every enforcing one must admit before any is charged, so what each
-- would write waits in w (per item i from w[W * (i - 1)]).
local W = 17
local function decide(now, keys, k, args, a, n, lease, out, o, w)
  if n == 1 then return decide_one(now, keys, k, args, a, lease, out, o) end
  local admitted_all = 1
  local b = o + 1 -- the request's status; each item's answer after it
  for i = 1, n do
    local nk, na, algo, cap, rate, window, asked, enforce, holder, key, hk, own, untl, cost,
          ok, remaining, reset, retry, sa, sb, sc, ttl, exp = decide_item(now, keys, k, args, a)
    k, a = nk, na
    if ok == 0 and enforce == '1' then admitted_all = 0 end
    local x = W * (i - 1)
    w[x + 1], w[x + 2], w[x + 3], w[x + 4], w[x + 5], w[x + 6], w[x + 7], w[x + 8] =
      algo, key, cost, window, sa, sb, sc, ttl
    w[x + 9], w[x + 10], w[x + 11], w[x + 12], w[x + 13], w[x + 14], w[x + 15], w[x + 16] =
      exp, hk, holder, own, untl, cap, rate, asked
    w[x + 17] = b
    b = answer(out, b, holder, ok, remaining, reset, retry, cost)
  end
  out[o + 1] = admitted_all
  if admitted_all == 0 then return k, a, b end
  for i = 1, n do
    local x = W * (i - 1)
    local p = w[x + 17]
    if out[p + 1] == 1 then
      local algo, key = w[x + 1], w[x + 2]
      charge(now, algo, key, lease, w[x + 3], w[x + 4], w[x + 5], w[x + 6], w[x + 7], w[x + 8],
             w[x + 9], w[x + 10], w[x + 11], w[x + 12], w[x + 13])
    end
  end
  for i = 1, n do -- after every charge: a later item may share an earlier one's key
    local x = W * (i - 1)
    local p = w[x + 17]
    local algo = w[x + 1]
    if out[p + 1] == 1 and out[p + 2] == 0 and algo ~= 5 and not (algo <= 1 and w[x + 4] > 0) then
      out[p + 4] = again_after(now, algo, w[x + 2], w[x + 14], w[x + 15], w[x + 4], w[x + 16],
                               w[x + 10], w[x + 11], w[x + 12])
    end
  end
  return k, a, b
end

local function acquire(keys, args)
  local now = clock(args[1])
  local out, w = { now }, {}
  local k, a, o = 1, 2, 1
  while a <= #args do
    local lease, n = args[a], num(args[a + 1])
    local ok, nk, na, no = pcall(decide, now, keys, k, args, a + 2, n, lease, out, o, w)
    if not ok then -- nk: the error; where this request's keys, args and answer end
      if type(nk) == 'table' then nk = nk.err end
      na, no = a + 2, o + 1
      for _ = 1, n do
        k, no = k + 1, no + 4
        if args[na + 6] ~= '' then k, na, no = k + 1, na + 3, no + 1 end
        na = na + 7
      end
      for j = o + 1, no do out[j] = 0 end
      out[o + 1], out[o + 2] = -1, tostring(nk)
      nk = k
    end
    k, a, o = nk, na, no
  end
  return out
end
