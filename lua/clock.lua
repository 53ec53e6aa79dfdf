-- The time every decision is made at: Redis's own TIME, whatever the caller sends. args[1]
-- of acquire and adjust is the slot where the tests' library (tests/lua/clock_injected.lua,
-- never loaded by the binary) takes an injected time; this library ignores it, so that no
-- client of the shipped library can place a decision in another period.
local function clock(_)
  if not call then bind() end
  local t = call('TIME')
  return num(t[1]) * US + num(t[2])
end

