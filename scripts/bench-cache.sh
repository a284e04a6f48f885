#!/usr/bin/env bash
# The caching resolver against the authoritative server, in one run on loopback.
#
# In a temporary directory it starts a GHR and a service (each with the test
# administrator of tests/fixtures), writes 0.NA/BENCH at the GHR naming the service's
# site, and starts `hdl serve --cache --root GHR` with `[cache] max_mib = MAX_MIB`.
# Then `hdl bench resolve` (UDP, 32 resolvers, no misses, HANDLES handles BENCH/bench/N
# seeded at the service) for DURATION seconds each: at the service, then twice at the cache
# (`--seed-at` the service; the first pass fills the cache), each with the server's
# CPU per answer (`--server-pid`). Last, the cache's hdl_cache_* metrics and its
# resident memory. Every server is stopped and reaped on exit, whatever happened.
#
# The hdl binary: HDL_BIN if set, else target/release/hdl (build it first).
#
# Usage: [HDL_BIN=PATH] [HANDLES=5000] [DURATION=8] [MAX_MIB=64] scripts/bench-cache.sh
set -euo pipefail

# shellcheck source=loopback-servers.sh
source "$(dirname "$0")/loopback-servers.sh"
handles=${HANDLES:-5000}
seconds=${DURATION:-8}

start ghr "${bootstrap[@]}"
ghr=$address
start service "${bootstrap[@]}"
service=$address
"$hdl" create 0.NA/BENCH --value "1:HS_SITE:$("$hdl" site --server "$service")" \
    --server "$ghr" "${auth[@]}" >/dev/null
printf '[cache]\nmax_mib = %s\n' "${MAX_MIB:-64}" >"$dir/cache.toml"
start cache --cache --root "$ghr" --config "$dir/cache.toml"
cache=$address
cache_http=$http

bench() { # SERVER PID EXTRA…
    local server=$1 pid=$2
    shift 2
    "$hdl" bench resolve --server "$server" --handles "$handles" --duration "$seconds" \
        --misses 0 --server-pid "$pid" "${auth[@]}" "$@"
}
echo "== authoritative service"
bench "$service" "$(cat "$dir/service.pid")"
for pass in first second; do
    echo "== caching resolver, $pass pass"
    bench "$cache" "$(cat "$dir/cache.pid")" --seed-at "$service"
done
curl -s "http://$cache_http/metrics" | grep -E '^hdl_cache_'
grep VmRSS "/proc/$(cat "$dir/cache.pid")/status"
