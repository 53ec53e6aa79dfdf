-- floodgate: settle a true cost after the response (delta > 0 charges, < 0 refunds).
-- Mirrors limit::adjust in src/limit/algorithm.cpp; debt is bounded by one capacity/limit.
-- KEYS[1] state key; ARGV: now ("" = TIME; lua/prelude.lua comes first), algorithm, capacity,
-- per_second, window_us, delta, then for a leased limit: holder (the instance's id, "" when not
-- leased), settled (units of its leases it spent since it last said so), returning ("1": the
-- delta is unused leased units going back, no longer held)
local key = KEYS[1]
local algo, cap, rate, window, delta =
  tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local holder = ARGV[7] or ''
local held = 0 -- what leases hold on a token_bucket or gcra key: never refilled
if holder ~= '' and algo <= 1 then
  local own, own_until
  held, own, own_until = leases_of(key, holder, algo, cap, rate)
  local freed = tonumber(ARGV[8])
  if ARGV[9] == '1' then freed = freed - delta end
  freed = math.min(own, freed)
  if freed > 0 then
    held, own = held - freed, own - freed
    set_lease(key, holder, own, own_until)
  end
end
local function ceil_us(x) return math.ceil(x - 1e-6) end
local function fmt(x) return string.format('%.17g', x) end
local function floor_to(t, w) return t - (t % w) end
local function store(value, ttl_us)
  if ttl_us > 0 then redis.call('SET', key, value, 'PX', math.max(1, math.ceil(ttl_us / 1000)))
  else redis.call('DEL', key) end
end

if algo == 0 then
  local tokens, updated = cap - held, now
  local raw = redis.call('GET', key)
  if raw then
    local a, b = string.match(raw, '^(%S+) (%S+)$')
    tokens, updated = tonumber(a), tonumber(b)
    tokens = math.min(cap - held, tokens + math.max(0, now - updated) * rate / US)
    updated = math.max(now, updated)
  end
  tokens = math.min(cap - held, math.max(-cap, tokens - delta))
  local missing = cap - tokens
  local ttl = 0
  if missing > 0 then ttl = ceil_us(missing * US / rate) end
  store(fmt(tokens) .. ' ' .. fmt(updated), ttl)
elseif algo == 1 then
  local debt = 0
  local raw = redis.call('GET', key)
  if raw then
    local a, b = string.match(raw, '^(%S+) (%S+)$')
    debt = math.max(0, tonumber(a) - math.max(0, now - tonumber(b)) * rate / US)
  end
  debt = math.min(2 * cap, math.max(held, debt + delta))
  local ttl = 0
  if debt > 0 then ttl = ceil_us(debt * US / rate) end
  store(fmt(debt) .. ' ' .. fmt(now), ttl)
elseif algo == 2 or algo == 4 then
  local start = floor_to(now, window)
  local s, c, p = start, 0, 0
  local raw = redis.call('GET', key)
  if raw then
    if algo == 2 then
      local a, b, d = string.match(raw, '^(%S+) (%S+) (%S+)$')
      a, b, d = tonumber(a), tonumber(b), tonumber(d)
      if a == start - window then s, c, p = start, 0, b
      elseif a >= start then s, c, p = a, b, d end
    else
      local a, b = string.match(raw, '^(%S+) (%S+)$')
      if tonumber(a) == start then c = tonumber(b) end
    end
  end
  c = math.min(2 * cap, math.max(0, c + delta))
  if algo == 2 then
    local ttl = 0
    if c > 0 then ttl = s + 2 * window - now elseif p > 0 then ttl = s + window - now end
    store(s .. ' ' .. c .. ' ' .. p, ttl)
  else
    local ttl = 0
    if c > 0 then ttl = start + window - now end
    store(start .. ' ' .. c, ttl)
  end
end
return 1
