-- The load mix of benchmarks/bench_wrk.py: 40% writes (20 to 400 characters), 60% pages of 50,
-- half of the pages following the last cursor seen. The key comes from MNEMO_BENCH_KEY.
local key = os.getenv("MNEMO_BENCH_KEY")
local headers = { ["X-Api-Key"] = key, ["Content-Type"] = "application/json" }
local cursor = nil
local n = 0
math.randomseed(7)

request = function()
  n = n + 1
  if math.random() < 0.4 then
    local body = '{"content":"wrk write ' .. n .. ' ' .. string.rep("x", math.random(20, 400)) .. '","domain":"w"}'
    return wrk.format("POST", "/api/v1/memory/write", headers, body)
  end
  local body = '{"limit":50}'
  if cursor ~= nil and math.random() < 0.5 then
    body = '{"limit":50,"cursor":"' .. cursor .. '"}'
  end
  return wrk.format("POST", "/api/v1/memory/recent", headers, body)
end

response = function(status, headers, body)
  local found = string.match(body, '"next_cursor":"([^"]+)"')
  if found ~= nil then
    cursor = found
  elseif string.find(body, '"next_cursor":null', 1, true) then
    cursor = nil
  end
end
