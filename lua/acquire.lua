-- floodgate: all of one request's limits, decided atomically with Redis's own clock.
-- Mirrors src/limit/algorithm.cpp line for line; a differential test holds both to the same
-- table of cases. Check every enforcing limit; only if all admit, charge them all (a shadow
-- limit is charged when it admits and never refuses).
--
-- KEYS[i]   state key of item i
-- (lua/prelude.lua comes first: ARGV[1], now, leases_of, set_lease)
-- ARGV[2]   lease id for concurrency items (unique per request)
-- ARGV[3..] per item, 10 values: algorithm, capacity, per_second, window_us, cost, enforce,
--           take_up_to (> 0: a lease: take as many free units as that, provided cost are),
--           holder (a leasing instance's id, "" otherwise), settled (units of its earlier
--           leases it has spent since it last said so), lease_ttl_us
--           algorithm: 0 token_bucket, 1 gcra, 2 sliding_window, 3 sliding_log,
--                      4 fixed_window, 5 concurrency
-- returns   { all_admitted, now, then per item: admitted, remaining, reset_after_us,
--             retry_after_us, limit, granted }; retry_after_us of an admitted item with nothing
--             remaining is when the same request would pass again (0: at once)
local lease = ARGV[2]
local CONCURRENCY_LEASE_US = 3600 * US

local function ceil_us(x) return math.ceil(x - 1e-6) end
local function floor_to(t, w) return t - (t % w) end
local function fmt(x) return string.format('%.17g', x) end
-- A sliding_log entry's member, "<lease>:<now>:<cost>" with integer digits: a cross-slot refund
-- (script_calls.cpp, log_member) spells the same member to ZREM it. Lua's own number-to-string
-- would write now (16 digits) in exponent form with 14 significant digits.
local function log_member(t, cost) return string.format('%s:%d:%d', lease, t, cost) end

-- Each evaluator returns: admitted, remaining, reset_after, retry_after, commit(function).
-- `held`: units leases hold (token_bucket, gcra; 0 otherwise).
local eval = {}

eval[0] = function(key, cap, rate, window, cost, held) -- token bucket
  local room = cap - held -- what is held cannot refill: the burst stays within capacity
  local tokens, updated = room, now
  local raw = redis.call('GET', key)
  if raw then
    local a, b = string.match(raw, '^(%S+) (%S+)$')
    tokens, updated = tonumber(a), tonumber(b)
    local elapsed = math.max(0, now - updated)
    tokens = math.min(room, tokens + elapsed * rate / US)
    updated = math.max(now, updated)
  end
  local function time_to(missing) if missing <= 0 then return 0 end return ceil_us(missing * US / rate) end
  if tokens + 1e-9 >= cost then
    local left = tokens - cost
    local reset = time_to(cap - left)
    return 1, math.max(0, math.floor(left + 1e-9)), reset, 0, function()
      if reset > 0 then redis.call('SET', key, fmt(left) .. ' ' .. fmt(updated), 'PX', math.ceil(reset / 1000))
      else redis.call('DEL', key) end
    end
  end
  return 0, 0, time_to(cap - tokens), math.max(1, time_to(cost - tokens)), nil
end

eval[1] = function(key, cap, rate, window, cost, held) -- gcra, kept as debt (see algorithm.hpp)
  local debt = 0
  local raw = redis.call('GET', key)
  if raw then
    local a, b = string.match(raw, '^(%S+) (%S+)$')
    debt = math.max(0, tonumber(a) - math.max(0, now - tonumber(b)) * rate / US)
  end
  debt = math.max(debt, held) -- what is held does not decay
  local function time_to(x) if x <= 0 then return 0 end return ceil_us(x * US / rate) end
  local nxt = debt + cost
  if nxt <= cap + 1e-9 then
    local reset = time_to(nxt)
    return 1, math.max(0, math.floor(cap - nxt + 1e-9)), reset, 0, function()
      if reset > 0 then redis.call('SET', key, fmt(nxt) .. ' ' .. fmt(now), 'PX', math.ceil(reset / 1000))
      else redis.call('DEL', key) end
    end
  end
  return 0, 0, time_to(debt), math.max(1, time_to(nxt - cap)), nil
end

local function read_window(key, start, window)
  local raw = redis.call('GET', key)
  if not raw then return start, 0, 0 end
  local s, c, p = string.match(raw, '^(%S+) (%S+) (%S+)$')
  s, c, p = tonumber(s), tonumber(c), tonumber(p)
  if s < start - window then return start, 0, 0 end
  if s == start - window then return start, 0, c end
  return s, c, p
end

local function window_reset(s, c, p, window)
  if c > 0 then return s + 2 * window - now end
  if p > 0 then return s + window - now end
  return 0
end

eval[2] = function(key, limit, rate, window, cost) -- sliding window
  local s, c, p = read_window(key, floor_to(now, window), window)
  local elapsed = math.min(1, math.max(0, (now - s) / window))
  local estimate = p * (1 - elapsed) + c
  if estimate + cost <= limit + 1e-9 then
    c = c + cost
    local reset = window_reset(s, c, p, window)
    return 1, math.max(0, math.floor(limit - estimate - cost + 1e-9)), reset, 0, function()
      redis.call('SET', key, s .. ' ' .. c .. ' ' .. p, 'PX', math.max(1, math.ceil(reset / 1000)))
    end
  end
  local retry
  local room = limit - c - cost
  if room >= 0 and p > 0 then
    local at = s + ceil_us(window * (1 - room / p))
    if at < s + window then retry = math.max(at - now, 1) end
  end
  if not retry then
    local e = 0
    if c > 0 then e = window * math.max(0, 1 - (limit - cost) / c) end
    retry = math.max(s + window + ceil_us(e) - now, 1)
  end
  return 0, 0, window_reset(s, c, p, window), retry, nil
end

eval[3] = function(key, limit, rate, window, cost) -- sliding log (sorted set: score = time)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local entries = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local count = 0
  for i = 1, #entries, 2 do count = count + tonumber(string.match(entries[i], ':(%d+)$')) end
  local newest = nil
  if #entries > 0 then newest = tonumber(entries[#entries]) end
  if count + cost <= limit then
    local reset = 0
    if cost > 0 then reset = window elseif newest then reset = newest + window - now end
    return 1, limit - count - cost, reset, 0, function()
      if cost > 0 then
        redis.call('ZADD', key, now, log_member(now, cost))
        redis.call('PEXPIRE', key, math.ceil(window / 1000))
      end
    end
  end
  local excess = count + cost - limit
  local retry = 0
  for i = 1, #entries, 2 do
    excess = excess - tonumber(string.match(entries[i], ':(%d+)$'))
    if excess <= 0 then retry = math.max(tonumber(entries[i + 1]) + window - now, 1) break end
  end
  local reset = 0
  if newest then reset = newest + window - now end
  if retry == 0 then -- a cost above the limit never fits
    if newest then retry = math.max(1, newest + window - now) else retry = window end
  end
  return 0, 0, reset, retry, nil
end

eval[4] = function(key, limit, rate, window, cost) -- fixed window
  local start = floor_to(now, window)
  local count = 0
  local raw = redis.call('GET', key)
  if raw then
    local s, c = string.match(raw, '^(%S+) (%S+)$')
    if tonumber(s) == start then count = tonumber(c) end
  end
  if count + cost <= limit then
    count = count + cost
    local reset = 0
    if count > 0 then reset = start + window - now end
    return 1, limit - count, reset, 0, function()
      if count > 0 then redis.call('SET', key, start .. ' ' .. count, 'PX', math.max(1, math.ceil(reset / 1000))) end
    end
  end
  local reset = 0
  if count > 0 then reset = start + window - now end
  return 0, 0, reset, math.max(start + window - now, 1), nil
end

eval[5] = function(key, limit, rate, window, cost) -- concurrency: leases expire by themselves
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local in_flight = redis.call('ZCARD', key)
  if in_flight + 1 <= limit then
    return 1, limit - in_flight - 1, 0, 0, function()
      redis.call('ZADD', key, now + CONCURRENCY_LEASE_US, lease)
      redis.call('PEXPIRE', key, math.ceil(CONCURRENCY_LEASE_US / 1000))
    end
  end
  return 0, 0, 0, US, nil
end

local n = #KEYS
local N = 10 -- ARGV values per item
local out = { 1, now }
local commits = {}
local helds = {}
local admitted_all = 1
for i = 1, n do
  local base = 2 + (i - 1) * N
  local algo = tonumber(ARGV[base + 1])
  local cap = tonumber(ARGV[base + 2])
  local rate = tonumber(ARGV[base + 3])
  local window = tonumber(ARGV[base + 4])
  local cost = tonumber(ARGV[base + 5])
  local enforce = ARGV[base + 6] == '1'
  local up_to = tonumber(ARGV[base + 7])
  local holder = ARGV[base + 8]
  local held = 0
  if holder ~= '' and algo <= 1 then
    local own, own_until
    held, own, own_until = leases_of(KEYS[i], holder, algo, cap, rate)
    -- What the holder spent is no longer held (and was charged when leased): report it now,
    -- whatever this decision is.
    local settled = math.min(own, tonumber(ARGV[base + 9]))
    if settled > 0 then
      held, own = held - settled, own - settled
      set_lease(KEYS[i], holder, own, own_until)
    end
    helds[i] = { own, now + tonumber(ARGV[base + 10]), own_until }
  end
  if up_to > 0 then -- free units: what an admission of nothing would leave
    local _, free = eval[algo](KEYS[i], cap, rate, window, 0, held)
    cost = math.max(cost, math.min(up_to, free))
  end
  local ok, remaining, reset, retry, commit = eval[algo](KEYS[i], cap, rate, window, cost, held)
  if ok == 0 and enforce then admitted_all = 0 end
  if commit and helds[i] then
    local h = helds[i]
    local c = commit
    commit = function() -- what a leasing instance takes, it holds until its until
      c()
      set_lease(KEYS[i], holder, h[1] + cost, math.max(h[2], h[3]))
    end
  end
  commits[i] = commit
  local b = 2 + (i - 1) * 6
  out[b + 1] = ok
  out[b + 2] = remaining
  out[b + 3] = reset
  out[b + 4] = retry
  out[b + 5] = cap
  out[b + 6] = 0
  if ok == 1 then out[b + 6] = cost end
end
out[1] = admitted_all
if admitted_all == 1 then
  for i = 1, n do
    if commits[i] then commits[i]() end
  end
  -- An admission that took the last unit also says when the same request would pass again
  -- (its retry_after; 0 = at once), so the proxy can refuse until then without asking.
  for i = 1, n do
    local base = 2 + (i - 1) * N
    local b = 2 + (i - 1) * 6
    local algo = tonumber(ARGV[base + 1])
    if out[b + 1] == 1 and out[b + 2] == 0 and algo ~= 5 then
      local held = 0
      if helds[i] then
        held = leases_of(KEYS[i], ARGV[base + 8], algo, tonumber(ARGV[base + 2]),
                         tonumber(ARGV[base + 3]))
      end
      local ok, _, _, retry = eval[algo](KEYS[i], tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]),
                                         tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5]), held)
      if ok == 0 then out[b + 4] = retry end
    end
  end
end
return out
