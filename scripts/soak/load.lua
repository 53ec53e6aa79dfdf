-- wrk script for scripts/soak.sh: every request has a unique path (so the origin's target log
-- shows any request that reached it twice), spread over the three routes, and every status
-- is counted per thread.
local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  n = 0
  statuses = {}
end

function request()
  n = n + 1
  local id = tid .. "-" .. n
  local r = n % 4
  if r == 0 then
    return wrk.format("GET", "/hot/" .. id)
  elseif r == 1 then
    return wrk.format("GET", "/closed/" .. id, { ["X-Client"] = "c" .. (n % 50) })
  else
    return wrk.format("GET", "/open/" .. id)
  end
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for status, count in pairs(t:get("statuses")) do
      total[status] = (total[status] or 0) + count
    end
  end
  local e = summary.errors
  io.write(string.format("client: %d requests completed; errors connect %d read %d write %d timeout %d\n",
    summary.requests, e.connect, e.read, e.write, e.timeout))
  local keys = {}
  for status in pairs(total) do table.insert(keys, status) end
  table.sort(keys)
  for _, status in ipairs(keys) do io.write(string.format("status %d: %d\n", status, total[status])) end
end
