-- Replays pre-signed request bodies (one JSON per line, each with its own nonce) and counts
-- responses whose envelope code is not "0". Each wrk thread takes its own slice of the file.
local bodies = {}
local counter = 0
bad = 0  -- global: done() reads it from each thread with thread:get
local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  local path = args[1]
  local nthreads = tonumber(args[2])
  local i = 0
  for line in io.lines(path) do
    if i % nthreads == tid then
      table.insert(bodies, line)
    end
    i = i + 1
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  if counter > #bodies then
    counter = 1 -- wrapped: nonces repeat, the server answers 1103 and the run is reported as short of bodies
  end
  return wrk.format(nil, nil, nil, bodies[counter])
end

function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"code":"0"', 1, true) then
    bad = bad + 1
    if bad <= 3 then io.stderr:write("bad response " .. status .. " " .. string.sub(body, 1, 200) .. "\n") end
  end
end

function done(summary, latency, requests)
  local total_bad = 0
  for _, t in ipairs(threads) do total_bad = total_bad + (t:get("bad") or 0) end
  io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d socket_errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    total_bad, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
