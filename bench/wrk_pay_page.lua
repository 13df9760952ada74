-- Presses the sandbox Pay button of hosted pages: one page path per line (a pre-created order each, paid once), and
-- counts every answer but the page's redirect to itself (paid) as an error. Each wrk thread takes its own share of
-- the file's lines from the offset (the third script argument: the lines the row's earlier slices used) on. The CSRF
-- cookie and the form's token carry one secret, the fourth script argument.
local paths = {}
local counter = 0
used = 0  -- global, as bad: lines taken (wrapping round counts on), read by done()
bad = 0  -- global: done() reads it from each thread with thread:get
local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  local nthreads = tonumber(args[2])
  local offset = tonumber(args[3])  -- lines an earlier slice of the row used
  local i = 0
  for line in io.lines(args[1]) do
    if i >= offset and (i - offset) % nthreads == tid then
      table.insert(paths, line)
    end
    i = i + 1
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
  wrk.headers["Cookie"] = "csrftoken=" .. args[4]
  wrk.body = "csrfmiddlewaretoken=" .. args[4] .. "&action=pay"
end

function request()
  counter = counter + 1
  used = used + 1
  if counter > #paths then
    counter = 1 -- wrapped: orders are paid again (a no-op) and the run is reported as short of bodies
  end
  return wrk.format(nil, paths[counter])
end

function response(status, headers, body)
  local location = headers["Location"] or ""
  if status ~= 302 or string.find(location, "?", 1, true) then  -- "?result=failed": declined
    bad = bad + 1
    if bad <= 3 then io.stderr:write("bad response " .. status .. " " .. location .. " " .. string.sub(body, 1, 200) .. "\n") end
  end
end

function done(summary, latency, requests)
  local total_bad = 0
  for _, t in ipairs(threads) do total_bad = total_bad + (t:get("bad") or 0) end
  local most = 0  -- lines used by the thread that used most, times the threads: the next slice starts after them
  for _, t in ipairs(threads) do most = math.max(most, t:get("used") or 0) end
  io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d socket_errors=%d consumed=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    total_bad, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    most * #threads))
end
