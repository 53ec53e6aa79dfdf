-- floodgate: the start of acquire.lua and adjust.lua (CMake joins them): the clock, and the
-- units leases hold on token_bucket and gcra keys (store/leased_store.hpp).
--
-- ARGV[1]   "" = use TIME (production); a number of microseconds = that time (tests only)
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local US = 1000000

-- The units each leasing instance holds sit in a hash beside the state: field = holder,
-- value = "units until_us". They count against the burst until spent (the holder reports them
-- as settled), returned (adjust.lua) or expired (a holder never spends a unit after its
-- until). Otherwise units taken from a full bucket and held while it refilled would add up to
-- more than its capacity.
--
-- Returns live (every live holder's units), own (the holder's), own_until; expired holders
-- are dropped. Before anything changes what is held, the state is brought up to now under
-- what was held since its last update (holders that expired meanwhile included: they may have
-- spent up to their until), so that a lower hold never credits a refill from before it.
local function leases_of(key, holder, algo, cap, rate)
  local hk = key .. ':leases'
  local all = redis.call('HGETALL', hk)
  if #all == 0 then return 0, 0, 0 end
  local raw = redis.call('GET', key)
  local a, b
  if raw then
    a, b = string.match(raw, '^(%S+) (%S+)$')
    a, b = tonumber(a), tonumber(b)
  end
  local held, live, own, own_until = 0, 0, 0, 0
  for i = 1, #all, 2 do
    local h, u = string.match(all[i + 1], '^(%S+) (%S+)$')
    h, u = tonumber(h), tonumber(u)
    if not b or u > b then held = held + h end
    if u > now then
      live = live + h
      if all[i] == holder then own, own_until = h, u end
    else
      redis.call('HDEL', hk, all[i])
    end
  end
  if held > 0 then
    if algo == 0 then -- token bucket: "tokens updated", at most cap - held while held
      local tokens = cap - held
      if raw then tokens = math.min(tokens, a + math.max(0, now - b) * rate / US) end
      redis.call('SET', key, string.format('%.17g %d', tokens, math.max(now, b or now)),
                 'PX', math.max(1, math.ceil((cap - tokens) / rate * 1000)))
    else -- gcra: "debt updated", at least held while held
      local debt = held
      if raw then debt = math.max(held, a - math.max(0, now - b) * rate / US) end
      redis.call('SET', key, string.format('%.17g %d', debt, math.max(now, b or now)),
                 'PX', math.max(1, math.ceil(debt / rate * 1000)))
    end
  end
  return live, own, own_until
end

local function set_lease(key, holder, units, untl)
  local hk = key .. ':leases'
  if units <= 0 then
    redis.call('HDEL', hk, holder)
    return
  end
  -- (%d: Lua would write a 16-digit time with 14 significant digits, rounding it either way)
  redis.call('HSET', hk, holder, string.format('%d %d', units, untl))
  -- Each field says when it ends; the hash's own expiry only collects it once all have, late
  -- enough never to come first (a minute: the differential tests' clocks run ahead of Redis's).
  local want = math.ceil((untl - now) / 1000) + 60000
  if redis.call('PTTL', hk) < want then redis.call('PEXPIRE', hk, want) end
end
