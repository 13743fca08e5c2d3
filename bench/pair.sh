#!/bin/bash
# Two builds alone, side by side (issue #47's check when the bench's full table moves more than
# the difference asked about): both gateways up at once on one redis-server and one upstream,
# the CPU a request read from /proc, and at the end the medians of the rounds' ratios.
#
# By default each round loads both at once (`wrk` on each, half the connections each): the
# box's noise (a neighbour, the host's clock) falls on both alike, so a round's ratio holds
# even when the box's speed moves threefold between rounds. With SEQUENTIAL=1 they are loaded
# in turn (the order alternating round by round), as before 0.7.9: that reading moved ±25 %
# round to round on a noisy box, and the gateway started first read 4-6 % slower against
# itself. With taskset and two cores or more, `wrk` runs on core 0 and every server on core 1,
# as the bench pins them. Needs wrk, redis-server and `npm run build`.
#
#   BASE=/path/to/older/dist/src/main.js bash bench/pair.sh              # 1,000 rotating bases
#   BASE=... SCENARIO=flood bash bench/pair.sh                           # one base over 10/min
#   BASE=... SCENARIO=append bash bench/pair.sh                          # a 1,000-row append
#   BASE=floor SCENARIO=rotating bash bench/pair.sh                      # against the one-trip floor
#   BASE=floor CUR_LOG_LEVEL=error bash bench/pair.sh                    # without its request lines
#   ROUNDS=8 SECS=6 CUR=dist/src/main.js SEQUENTIAL=0                    # the defaults
#
# BASE=floor loads bench/floor.js (node:http, one EVALSHA a call, no log or metrics) with the
# scenario's limit in place of an older build: issue #47's "at least the one-trip floor", read
# both at once rather than from the interleaved table.
set -euo pipefail
cd "$(dirname "$0")/.."
CUR=${CUR:-dist/src/main.js}
BASE=${BASE:?BASE=path/to/older/dist/src/main.js}
ROUNDS=${ROUNDS:-8}
SECS=${SECS:-6}
SCENARIO=${SCENARIO:-rotating}
SEQUENTIAL=${SEQUENTIAL:-0}
SERVER=()
LOAD=()
if command -v taskset > /dev/null && [ "$(nproc)" -ge 2 ]; then
  SERVER=(taskset -c 1)
  LOAD=(taskset -c 0)
fi
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
if [ "$SCENARIO" = append ]; then
  # The bench's append: 1,000 rows of JSON (43 KB) to 1,000 rotating bases, read and counted.
  LIMIT=10000000/min
  ROWS=$(node -e "process.stdout.write(Array.from({length:1000},(_,i)=>'{\"Name\":\"row '+i+'\",\"Count\":'+i+',\"Done\":false}').join(','))")
  cat > "$WORK/load.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"table_name":"Table1","rows":[$ROWS],"apply_default":false}'
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, string.format("/api-gateway/api/v2/dtables/%08x-0d3b-4c59-9a51-3e2d7c8b9a10/rows/", (n % 1000) + 1))
end
LUA
elif [ "$SCENARIO" = flood ]; then
  LIMIT=10/min
  echo 'request = function() return wrk.format("GET", "/api-gateway/api/v2/dtables/00000001-0d3b-4c59-9a51-3e2d7c8b9a10/rows/?table_name=Table1") end' > "$WORK/load.lua"
else
  LIMIT=10000000/min
  cat > "$WORK/load.lua" <<'LUA'
local uuids = {}
for i = 1, 1000 do uuids[i] = string.format("%08x-0d3b-4c59-9a51-3e2d7c8b9a10", i) end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api-gateway/api/v2/dtables/" .. uuids[(n % 1000) + 1] .. "/rows/?table_name=Table1")
end
LUA
fi
RPORT=$(free_port); UPORT=$(free_port); CPORT=$(free_port); BPORT=$(free_port)
"${SERVER[@]}" redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no > /dev/null &
"${SERVER[@]}" node dist/bench/upstream.js "$UPORT" > /dev/null &
sleep 1
conf() {
  printf 'listen: { host: 127.0.0.1, port: %s }\nadmin: { host: 127.0.0.1, port: 0 }\nupstream: { url: "http://127.0.0.1:%s" }\nstore: { url: "redis://127.0.0.1:%s", prefix: "%s:" }\nrate_limits: { base: %s }\n' \
    "$1" "$UPORT" "$RPORT" "$2" "$LIMIT" > "$WORK/$2.yaml"
}
conf "$CPORT" cur
conf "$BPORT" base
# Both gateways run as the image starts basegate (its NODE_OPTIONS, src/node-options.ts), unless
# GW_NODE_OPTIONS says otherwise (GW_NODE_OPTIONS= runs them with Node's defaults).
GW_NODE_OPTIONS=${GW_NODE_OPTIONS-$(node -e "import('./dist/src/node-options.js').then((m) => process.stdout.write(m.NODE_OPTIONS))")}
# CUR_LOG_LEVEL: the current build's LOG_LEVEL alone (`error`: no request lines, what a call's
# line costs read against the floor, which writes none); the other keeps the environment's.
LOG_LEVEL=${CUR_LOG_LEVEL:-${LOG_LEVEL:-info}} NODE_OPTIONS="$GW_NODE_OPTIONS" "${SERVER[@]}" node "$CUR" --config "$WORK/cur.yaml" > >(cat > /dev/null) &
CP=$!
if [ "$BASE" = floor ]; then
  "${SERVER[@]}" node dist/bench/floor.js "$BPORT" "http://127.0.0.1:$UPORT" "redis://127.0.0.1:$RPORT" "${LIMIT%%/*}" > /dev/null &
else
  NODE_OPTIONS="$GW_NODE_OPTIONS" "${SERVER[@]}" node "$BASE" --config "$WORK/base.yaml" > >(cat > /dev/null) &
fi
BP=$!
sleep 3
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)
# taskset execs the command: $! is the server's own pid.
one() { # port connections out
  "${LOAD[@]}" wrk -t1 -c"$2" -d"${SECS}s" -s "$WORK/load.lua" "http://127.0.0.1:$1" > "$3" 2>&1
}
said() { # name out cpu-ticks
  local reqs rate
  reqs=$(awk '/requests in/ {print $1}' "$2")
  rate=$(awk '/Requests\/sec/ {print $2}' "$2")
  echo "round $r $1 req/s $rate cpu_us_per_req $(($3 * 1000000 / TICK / reqs))" | tee -a "$WORK/rounds"
}
# Warm both (the first seconds of a process run its code before the JIT has compiled it).
r=0
one "$CPORT" 25 "$WORK/cur.out" &
one "$BPORT" 25 "$WORK/base.out"
wait $!
for r in $(seq 1 "$ROUNDS"); do
  if [ "$SEQUENTIAL" != 1 ]; then
    c0=$(cpu "$CP")
    b0=$(cpu "$BP")
    if [ $((r % 2)) = 1 ]; then
      one "$CPORT" 25 "$WORK/cur.out" &
      one "$BPORT" 25 "$WORK/base.out"
    else
      one "$BPORT" 25 "$WORK/base.out" &
      one "$CPORT" 25 "$WORK/cur.out"
    fi
    wait $!
    said cur "$WORK/cur.out" $(($(cpu "$CP") - c0))
    said base "$WORK/base.out" $(($(cpu "$BP") - b0))
    continue
  fi
  order="cur base"
  if [ $((r % 2)) = 0 ]; then order="base cur"; fi
  for n in $order; do
    if [ "$n" = cur ]; then pid=$CP port=$CPORT; else pid=$BP port=$BPORT; fi
    c0=$(cpu "$pid")
    one "$port" 50 "$WORK/$n.out"
    said "$n" "$WORK/$n.out" $(($(cpu "$pid") - c0))
  done
done
# The medians of the rounds' ratios (cur / base): calls a second, and CPU a call.
ratios() { # field
  awk -v f="$1" '{ if ($3 == "cur") c[$2] = $f; else b[$2] = $f } END { for (k in c) print c[k] / b[k] }' \
    "$WORK/rounds" | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo "medians of $ROUNDS rounds, cur / base: calls a second $(ratios 5), CPU a call $(ratios 7)"
