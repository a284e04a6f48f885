#!/usr/bin/env bash
# The HTTP edge of one node on loopback, server and load pinned apart.
#
# Starts a lone `hdl serve` (the test administrator of tests/fixtures) pinned to CPU 0
# and creates ADMIN/x holding a URL, then for the proxy
# (`GET /ADMIN/x`, a 302) and the API (`GET /api/handles/ADMIN/x`) runs `ab -k` (Debian's
# apache2-utils) pinned to CPU 1, ROUNDS times each, alternated, and prints for every
# run the requests a second and the server's CPU per request (from /proc/PID/stat).
# Every server is stopped and reaped on exit.
#
# The hdl binary: HDL_BIN if set, else target/release/hdl (build it first).
#
# Usage: [HDL_BIN=PATH] [REQUESTS=60000] [CONCURRENCY=32] [ROUNDS=2] scripts/bench-http.sh
set -euo pipefail

command -v ab >/dev/null || { echo "ab not found: install apache2-utils" >&2; exit 1; }
# shellcheck source=loopback-servers.sh
source "$(dirname "$0")/loopback-servers.sh"

start_pinned node "${bootstrap[@]}"
"$hdl" create ADMIN/x --value 1:URL:https://example.org/some/where --server "$address" \
    "${auth[@]}" >/dev/null

requests=${REQUESTS:-60000}
hertz=$(getconf CLK_TCK)

# Prints the process's CPU time so far, in clock ticks (user + system).
ticks() {
    awk '{print $14 + $15}' "/proc/$pid/stat"
}

# Runs ab once against URL and prints what it and the server did.
measure() {
    local what=$1 url=$2 before after rate
    before=$(ticks)
    rate=$(taskset -c 1 ab -q -k -n "$requests" -c "${CONCURRENCY:-32}" "$url" 2>&1 |
        awk '/Requests per second/ {print $4} /Failed requests/ && $3 != 0 {print "failed " $3 > "/dev/stderr"}')
    after=$(ticks)
    awk -v what="$what" -v rate="$rate" -v t=$((after - before)) -v hz="$hertz" -v n="$requests" \
        'BEGIN {printf "%-6s %9.0f requests/s %6.1f us of server CPU a request\n", what, rate, t / hz * 1e6 / n}'
}

for _ in $(seq "${ROUNDS:-2}"); do
    measure proxy "http://$http/ADMIN/x"
    measure api "http://$http/api/handles/ADMIN/x"
done
