-- floodgate's Redis library: CMake joins lua/prelude.lua, clock.lua, acquire.lua and adjust.lua
-- into one text. Redis 7 loads it once (FUNCTION LOAD, as library floodgate_<hash of the text>) and
-- runs acquire and adjust with FCALL; on a Redis without functions the same text followed by
-- `return acquire(KEYS, ARGV)` is the EVALSHA script (scripts.cpp). While a library loads,
-- Redis lets its top level see no globals, so the top level only defines local functions and
-- constant tables, built once; math, string, struct and redis are looked up when they run.
-- Nothing below builds a closure or a table per decision.
local US = 1000000

-- Redis's Lua functions, looked up once: while the library loads its top level sees no
-- globals, so the first call fills these in (bind).
local call, max, min, floor, ceil, num, spack, sunpack, byte, match, format
local function bind()
  call, max, min, floor, ceil = redis.call, math.max, math.min, math.floor, math.ceil
  num, spack, sunpack = tonumber, struct.pack, struct.unpack
  byte, match, format = string.byte, string.match, string.format
end

local function ceil_us(x) return ceil(x - 1e-6) end
-- microseconds until x units are back at `rate` per second
local function time_to(x, rate) if x <= 0 then return 0 end return ceil_us(x * US / rate) end

-- The state of token_bucket, gcra, sliding_window and fixed_window keys: three numbers and
-- the instant it goes neutral (when its key expires), packed: version byte 1, four doubles.
-- A decision neither formats nor parses a number. (Text states, "a b [c]", were written
-- by earlier builds: read once, written back packed.)
local function read_state(raw)
  if byte(raw, 1) == 1 then
    local _, a, b, c, exp = sunpack('<Bdddd', raw)
    return a, b, c, exp
  end
  local a, b, c = match(raw, '^(%S+) (%S+) ?(%S*)$')
  return num(a), num(b), num(c) or 0, 0
end

-- The key expires when its state goes neutral, ttl_us from now (0: DEL it now): idle callers
-- cost no memory. When that instant has not moved (a window's state within its window), the
-- expiry the key has is kept (SET ... KEEPTTL): cheaper for Redis than setting it again.
local function write_state(now, key, a, b, c, ttl_us, exp)
  if ttl_us <= 0 then
    call('DEL', key)
  elseif exp == now + ttl_us then
    call('SET', key, spack('<Bdddd', 1, a, b, c, exp), 'KEEPTTL')
  else
    call('SET', key, spack('<Bdddd', 1, a, b, c, now + ttl_us),
               'PX', max(1, ceil(ttl_us / 1000)))
  end
end

-- The units each leasing instance holds sit in a hash beside the state (`hk`, declared with
-- it): field = holder, value = "units until_us". They count against the burst until spent
-- (the holder reports them as settled), returned (adjust) or expired (a holder never spends a
-- unit after its until). Otherwise units taken from a full bucket and held while it refilled
-- would add up to more than its capacity.
--
-- Returns live (every live holder's units), own (the holder's), own_until; expired holders
-- are dropped. Before anything changes what is held, the state is brought up to now under
-- what was held since its last update (holders that expired meanwhile included: they may have
-- spent up to their until), so that a lower hold never credits a refill from before it.
local function leases_of(now, key, hk, holder, algo, cap, rate)
  local all = call('HGETALL', hk)
  if #all == 0 then return 0, 0, 0 end
  local raw = call('GET', key)
  local a, b, c, exp = nil, nil, 0, 0
  if raw then a, b, c, exp = read_state(raw) end
  local held, live, own, own_until = 0, 0, 0, 0
  for i = 1, #all, 2 do
    local h, u = match(all[i + 1], '^(%S+) (%S+)$')
    h, u = num(h), num(u)
    if not b or u > b then held = held + h end
    if u > now then
      live = live + h
      if all[i] == holder then own, own_until = h, u end
    else
      call('HDEL', hk, all[i])
    end
  end
  if held > 0 then
    if algo == 0 then -- token bucket: "tokens updated", at most cap - held while held
      local tokens = cap - held
      if raw then tokens = min(tokens, a + max(0, now - b) * rate / US) end
      write_state(now, key, tokens, max(now, b or now), 0, time_to(cap - tokens, rate), exp)
    else -- gcra: "debt updated", at least held while held
      local debt = held
      if raw then debt = max(held, a - max(0, now - b) * rate / US) end
      write_state(now, key, debt, max(now, b or now), 0, time_to(debt, rate), exp)
    end
  end
  return live, own, own_until
end

local function set_lease(now, hk, holder, units, untl)
  if units <= 0 then
    call('HDEL', hk, holder)
    return
  end
  -- (%d: Lua would write a 16-digit time with 14 significant digits, rounding it either way)
  call('HSET', hk, holder, format('%d %d', units, untl))
  -- Each field says when it ends; the hash's own expiry only collects it once all have, late
  -- enough never to come first (a minute: the differential tests' clocks run ahead of Redis's).
  local want = ceil((untl - now) / 1000) + 60000
  if call('PTTL', hk) < want then call('PEXPIRE', hk, want) end
end
