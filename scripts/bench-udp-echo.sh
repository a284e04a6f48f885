#!/usr/bin/env bash
# UDP resolution of one node against a bare C echo server, the same load offered to each.
#
# Builds scripts/udp-echo.c with cc, starts a lone `hdl serve` (the test administrator of
# tests/fixtures) pinned to CPU 0 and seeds HANDLES handles; then
# ROUNDS times, alternating: `hdl bench resolve --udp --no-seed --misses 0 --rate RATE
# --server-pid PID` from CPU 1 against the node, and the same against a fresh echo server
# pinned to CPU 0. The bench counts what the echo sends back as `echoed`, with its rate
# and latencies, and its CPU per datagram from /proc like the node's; the echo's own
# count and CPU (getrusage) follow. RATE=0 offers as fast as answers come (closed loop,
# CONCURRENCY requests outstanding): saturation. Every process is stopped and reaped on
# exit.
#
# Usage: [HDL_BIN=PATH] [RATE=50000] [HANDLES=1000] [CONCURRENCY=32] [DURATION=5]
#        [ROUNDS=1] scripts/bench-udp-echo.sh
set -euo pipefail

# shellcheck source=loopback-servers.sh
source "$(dirname "$0")/loopback-servers.sh"

cc -O2 -o "$dir/udp-echo" "$root/scripts/udp-echo.c"
start_pinned node "${bootstrap[@]}"
rate=()
[ "${RATE:-50000}" -gt 0 ] && rate=(--rate "${RATE:-50000}")
bench=(bench resolve --udp --prefix ADMIN --handles "${HANDLES:-1000}"
    --concurrency "${CONCURRENCY:-32}")
"$hdl" "${bench[@]}" --server "$address" --duration 1 "${auth[@]}" >/dev/null

for round in $(seq "${ROUNDS:-1}"); do
    echo "== round $round: hdl"
    taskset -c 1 "$hdl" "${bench[@]}" --server "$address" --no-seed --misses 0 "${rate[@]}" \
        --duration "${DURATION:-5}" --server-pid "$pid"
    echo "== round $round: echo"
    taskset -c 0 "$dir/udp-echo" >"$dir/echo.out" &
    echo_pid=$!
    pids+=("$echo_pid")
    for _ in $(seq 50); do
        grep -q '^listening' "$dir/echo.out" && break
        sleep 0.1
    done
    echo_port=$(sed -n 's/^listening //p' "$dir/echo.out")
    taskset -c 1 "$hdl" "${bench[@]}" --server "127.0.0.1:$echo_port" --no-seed --misses 0 \
        "${rate[@]}" --duration "${DURATION:-5}" --server-pid "$echo_pid" |
        grep -Ev '^(hits|misses) '
    kill -TERM "$echo_pid"
    wait "$echo_pid" || true
    tail -n 1 "$dir/echo.out"
done
