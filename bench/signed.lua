-- wrk script: every request is a distinct, pre-signed webhook.
-- Thread N reads "<prefix>.N": lines of "message-id TAB timestamp TAB signature TAB body"
-- (python -m bench writes them) and sends each line once; should it run out, it starts over
-- and counts the wrap, since a re-sent message id is a duplicate, not new work.
-- done() prints one line "BENCH_JSON {...}" with the figures the bench reads.

local threads = {}
local count = 0

function setup(thread)
  thread:set("tid", count)
  count = count + 1
  table.insert(threads, thread)
end

function init(args)
  local prefix = args[1]
  requests = {}
  local file = assert(io.open(prefix .. "." .. tid, "r"))
  for line in file:lines() do
    local id, ts, sig, body = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    requests[#requests + 1] = wrk.format("POST", nil, {
      ["svix-id"] = id,
      ["svix-timestamp"] = ts,
      ["svix-signature"] = sig,
      ["Content-Type"] = "application/json",
    }, body)
  end
  file:close()
  nxt = 1
  wraps = 0
  ok = 0
  other = 0
  codes = ""
end

function request()
  local r = requests[nxt]
  nxt = nxt + 1
  if nxt > #requests then
    nxt = 1
    wraps = wraps + 1
  end
  return r
end

function response(status, headers, body)
  if status >= 200 and status < 300 then
    ok = ok + 1
  else
    other = other + 1
    if #codes < 200 then codes = codes .. status .. " " end
  end
end

function done(summary, latency, requests)
  local ok_total, other_total, wraps_total, codes_all = 0, 0, 0, ""
  for _, thread in ipairs(threads) do
    ok_total = ok_total + thread:get("ok")
    other_total = other_total + thread:get("other")
    wraps_total = wraps_total + thread:get("wraps")
    codes_all = codes_all .. thread:get("codes")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "duration_us": %d, "ok": %d, "non2xx": %d, "wraps": %d, ' ..
    '"socket_errors": %d, "timeouts": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, ' ..
    '"p999_us": %d, "max_us": %d, "mean_us": %.1f, "codes": "%s"}\n',
    summary.requests, summary.duration, ok_total, other_total, wraps_total,
    e.connect + e.read + e.write, e.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean, codes_all))
end
