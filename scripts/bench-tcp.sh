#!/usr/bin/env bash
# Handle protocol resolution over TCP on one node on loopback, server and load pinned
# apart: a connection per request (as J9 clients open them) and kept connections.
#
# Starts a lone `hdl serve` (the test administrator of tests/fixtures) under `taskset
# -c 0` (so its runtime has one worker), seeds HANDLES handles
# ADMIN/bench/<n>, then runs `hdl bench resolve --tcp` pinned to CPU 1, ROUNDS times
# each way, alternated, and prints for every run the answers a second and the server's
# CPU per answer, user and system time apart (/proc/PID/stat): at a connection per
# request the kernel's share is most of it.
# Every server is stopped and reaped on exit.
#
# The server: HDL_BIN if set, else target/release/hdl (build it first); the load:
# HDL_CLIENT_BIN if set, else the same binary (keep it fixed when comparing servers).
#
# Usage: [HDL_BIN=PATH] [HDL_CLIENT_BIN=PATH] [DURATION=5] [CONCURRENCY=32] [ROUNDS=2]
#        [HANDLES=1000] scripts/bench-tcp.sh
set -euo pipefail

[ "$(nproc)" -ge 2 ] || { echo "needs two CPUs: the server on 0, the load on 1" >&2; exit 1; }

# shellcheck source=loopback-servers.sh
source "$(dirname "$0")/loopback-servers.sh"
client=${HDL_CLIENT_BIN:-$hdl}

pin=(taskset -c 0)
start node "${bootstrap[@]}"
pid=$(cat "$dir/node.pid")
"$client" bench resolve --server "$address" --tcp --prefix ADMIN --handles "${HANDLES:-1000}" \
    --duration 1 "${auth[@]}" >/dev/null

# Runs the bench once, over TCP with ARGS, and prints its rate and the server's CPU.
measure() {
    local what=$1 before after counted answers rate total user sys
    shift
    before=$(ticks "$pid")
    counted=$(taskset -c 1 "$client" bench resolve --server "$address" --tcp --prefix ADMIN \
        --no-seed --handles "${HANDLES:-1000}" --concurrency "${CONCURRENCY:-32}" \
        --duration "${DURATION:-5}" "$@" |
        awk '/^total/ {print $2, $4} /^total/ && $6 != 0 {print "errors " $6 > "/dev/stderr"}')
    read -r answers rate <<<"$counted"
    after=$(ticks "$pid")
    read -r total user sys <<<"$(cpu_per "$before" "$after" "$answers")"
    printf "%-9s %9.0f answers/s %6.1f us of server CPU an answer (%s user, %s system)\n" \
        "$what" "$rate" "$total" "$user" "$sys"
}

for _ in $(seq "${ROUNDS:-2}"); do
    measure per-conn --connection-per-request
    measure kept
done
