#!/usr/bin/env bash
# The caching resolver on loopback: against the authoritative server, or its memory
# with a million distinct handles.
#
# In a temporary directory it starts a GHR and a service (each with the test
# administrator of tests/fixtures), writes 0.NA/BENCH at the GHR naming the service's
# site, and starts `hdl serve --cache --root GHR` with `[cache] max_mib = MAX_MIB`.
# Then, as MODE says:
#
# - `compare` (the default): `hdl bench resolve` (UDP, 32 resolvers, no misses,
#   HANDLES (5,000) handles BENCH/bench/N seeded at the service) for DURATION seconds
#   each: at the service, then twice at the cache (`--seed-at` the service; the first
#   pass fills the cache), each with the server's CPU per answer (`--server-pid`).
# - `distinct`: HANDLES (1,000,000) distinct handles BENCH/bench/N each resolved once
#   through the cache (`--each-once --no-seed`), every one a miss that is cached. The
#   service holds none of them: a template (HS_NAMESPACE on its 0.NA/BENCH, delimiter
#   `/`) derives each one's URL from its name, so a million handles cost one value
#   and no bulk load. First a warm-up of WARMUP (10,000) other distinct handles
#   (BENCH/warmup/bench/N), so that the process's threads and buffers are in use;
#   the cache's metrics and memory are shown at the start, after the warm-up and
#   after the run (`VmHWM`: the most it ever held).
#
# Last, the cache's hdl_cache_* metrics and its resident memory. Every server is
# stopped and reaped on exit, whatever happened.
#
# The hdl binary: HDL_BIN if set, else target/release/hdl (build it first).
#
# Usage: [HDL_BIN=PATH] [MODE=compare|distinct] [HANDLES=5000|1000000] [DURATION=8]
#        [WARMUP=10000] [MAX_MIB=64] scripts/bench-cache.sh
set -euo pipefail

# shellcheck source=loopback-servers.sh
source "$(dirname "$0")/loopback-servers.sh"
mode=${MODE:-compare}
case $mode in
compare) handles=${HANDLES:-5000} ;;
distinct) handles=${HANDLES:-1000000} ;;
*) echo "MODE is compare or distinct, not $mode" >&2; exit 2 ;;
esac
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
held() { # WHEN: the cache's metrics and memory now
    echo "-- $1"
    curl -s "http://$cache_http/metrics" | grep -E '^hdl_cache_(bytes|entries|evictions_total|misses_total) '
    grep -E 'VmRSS|VmHWM' "/proc/$(cat "$dir/cache.pid")/status"
}

compare() {
    echo "== authoritative service"
    bench "$service" "$(cat "$dir/service.pid")"
    for pass in first second; do
        echo "== caching resolver, $pass pass"
        bench "$cache" "$(cat "$dir/cache.pid")" --seed-at "$service"
    done
}

distinct() {
    local template='<namespace><template delimiter="/">
      <value index="1" type="URL" data="https://repository.example.org/${extension}"/>
    </template></namespace>'
    "$hdl" create 0.NA/BENCH --value "1:HS_NAMESPACE:$template" \
        --server "$service" "${auth[@]}" >/dev/null
    held "started"
    echo "== warm-up: ${WARMUP:-10000} distinct handles"
    "$hdl" bench resolve --server "$cache" --prefix BENCH/warmup --handles "${WARMUP:-10000}" \
        --each-once --no-seed --misses 0 --duration 600 >/dev/null
    held "after the warm-up"
    echo "== $handles distinct handles, each resolved once through the cache"
    "$hdl" bench resolve --server "$cache" --handles "$handles" --each-once --no-seed \
        --misses 0 --duration 3600 --server-pid "$(cat "$dir/cache.pid")"
}

$mode
echo "-- at the end"
curl -s "http://$cache_http/metrics" | grep -E '^hdl_cache_'
grep -E 'VmRSS|VmHWM' "/proc/$(cat "$dir/cache.pid")/status"
