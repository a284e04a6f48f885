#!/usr/bin/env bash
# UDP resolution of one node on loopback, server and load pinned apart.
#
# Starts a lone `hdl serve` (the test administrator of tests/fixtures) pinned to CPU 0
# and seeds HANDLES handles under ADMIN, then runs
# `hdl bench resolve --udp --no-seed --server-pid PID` pinned to CPU 1, ROUNDS times,
# and prints its figures (the server's CPU per answer among them). Every server is
# stopped and reaped on exit.
#
# The hdl binary: HDL_BIN if set, else target/release/hdl (build it first).
#
# Usage: [HDL_BIN=PATH] [HANDLES=1000] [CONCURRENCY=32] [DURATION=5] [ROUNDS=1] scripts/bench-udp.sh
set -euo pipefail

# shellcheck source=loopback-servers.sh
source "$(dirname "$0")/loopback-servers.sh"

start_pinned node "${bootstrap[@]}"
bench=(bench resolve --server "$address" --udp --prefix ADMIN --handles "${HANDLES:-1000}"
    --concurrency "${CONCURRENCY:-32}")
"$hdl" "${bench[@]}" --duration 1 "${auth[@]}" >/dev/null

for _ in $(seq "${ROUNDS:-1}"); do
    taskset -c 1 "$hdl" "${bench[@]}" --no-seed --duration "${DURATION:-5}" --server-pid "$pid"
done
