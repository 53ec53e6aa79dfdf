-- Tests only, in place of lua/clock.lua: args[1] = "" is Redis's TIME, a number of
-- microseconds is that time. The tests whose point is a date (a month's end at local midnight,
-- the differential tests' fake clock) load this library under its own name; the binary embeds
-- lua/clock.lua and never has this one.
local function clock(arg)
  if not call then bind() end
  if arg ~= '' then return num(arg) end
  local t = call('TIME')
  return num(t[1]) * US + num(t[2])
end

