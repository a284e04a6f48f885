#!/usr/bin/env bash
# The HTTP edge of one node on loopback, server and load pinned apart.
#
# Starts a lone `hdl serve` (the test administrator of tests/fixtures) pinned to CPU 0
# and creates ADMIN/x holding a URL, then for the proxy
# (`GET /ADMIN/x`, a 302) and the API (`GET /api/handles/ADMIN/x`) runs `ab -k` (Debian's
# apache2-utils) pinned to CPU 1, ROUNDS times each, alternated, and prints for every
# run the requests a second and the server's CPU per request, user and system time apart
# (from /proc/PID/stat). With WITH_NGINX=1 each round also runs the same load against nginx
# (Debian's nginx-light: one worker pinned to CPU 0, `return 302`, no log) on NGINX_PORT:
# what the kernel and a lean server cost on this machine, in the same session.
# Every server is stopped and reaped on exit.
#
# The hdl binary: HDL_BIN if set, else target/release/hdl (build it first).
#
# Usage: [HDL_BIN=PATH] [REQUESTS=60000] [CONCURRENCY=32] [ROUNDS=2] [WITH_NGINX=1]
#        [NGINX_PORT=18080] scripts/bench-http.sh
set -euo pipefail

command -v ab >/dev/null || { echo "ab not found: install apache2-utils" >&2; exit 1; }
# shellcheck source=loopback-servers.sh
source "$(dirname "$0")/loopback-servers.sh"

start_pinned node "${bootstrap[@]}"
"$hdl" create ADMIN/x --value 1:URL:https://example.org/some/where --server "$address" \
    "${auth[@]}" >/dev/null

requests=${REQUESTS:-60000}

# Runs ab once against URL, served by process PID, and prints what both did.
measure() {
    local what=$1 server=$2 url=$3 before after rate total user sys
    before=$(ticks "$server")
    rate=$(taskset -c 1 ab -q -k -n "$requests" -c "${CONCURRENCY:-32}" "$url" 2>&1 |
        awk '/Requests per second/ {print $4} /Failed requests/ && $3 != 0 {print "failed " $3 > "/dev/stderr"}')
    after=$(ticks "$server")
    read -r total user sys <<<"$(cpu_per "$before" "$after" "$requests")"
    printf "%-6s %9.0f requests/s %6.1f us of server CPU a request (%s user, %s system)\n" \
        "$what" "$rate" "$total" "$user" "$sys"
}

# Starts nginx pinned to CPU 0, one worker answering every request with the proxy's 302.
start_nginx() {
    command -v nginx >/dev/null || { echo "nginx not found: install nginx-light" >&2; exit 1; }
    local port=${NGINX_PORT:-18080}
    cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
master_process off;
daemon off;
error_log $dir/nginx.err;
pid $dir/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$port;
        location / { return 302 https://example.org/some/where; }
    }
}
CONF
    taskset -c 0 nginx -p "$dir" -c "$dir/nginx.conf" 2>"$dir/nginx.stderr" &
    nginx_pid=$!
    pids+=("$nginx_pid")
    nginx_url="http://127.0.0.1:$port/ADMIN/x"
    # Ready once it answers as nginx while still running (not some other server on the port).
    for _ in $(seq 50); do
        kill -0 "$nginx_pid" 2>/dev/null || break
        ab -n 1 "$nginx_url" 2>/dev/null | grep -q '^Server Software: *nginx' &&
            kill -0 "$nginx_pid" 2>/dev/null && return
        sleep 0.1
    done
    echo "nginx did not start on port $port:" >&2
    cat "$dir/nginx.stderr" >&2
    exit 1
}

if [ -n "${WITH_NGINX:-}" ]; then start_nginx; fi
for _ in $(seq "${ROUNDS:-2}"); do
    measure proxy "$pid" "http://$http/ADMIN/x"
    measure api "$pid" "http://$http/api/handles/ADMIN/x"
    if [ -n "${WITH_NGINX:-}" ]; then measure nginx "$nginx_pid" "$nginx_url"; fi
done
