#!/usr/bin/env bash
# Template-derived resolution on one node, on loopback.
#
# In a temporary directory it starts two services (each with the test administrator of
# tests/fixtures): SEED, which only takes the handles `hdl bench resolve` seeds, and
# TPL, whose 0.NA/BENCH holds an HS_NAMESPACE template with delimiter `/` (the base is
# the prefix itself) making a URL and a DESC from a `matches` test. Then `hdl bench
# resolve --server TPL --seed-at SEED` (UDP, 32 resolvers, no misses) for DURATION
# seconds: every BENCH/bench/N is missing at TPL, so every answer is derived, with
# TPL's CPU per answer (`--server-pid`). Every server is stopped and reaped on exit.
#
# The hdl binary: HDL_BIN if set, else target/release/hdl (build it first).
#
# Usage: [HDL_BIN=PATH] [HANDLES=1000] [DURATION=8] scripts/bench-templates.sh
set -euo pipefail

# shellcheck source=loopback-servers.sh
source "$(dirname "$0")/loopback-servers.sh"

start seed "${bootstrap[@]}"
seed=$address
start tpl "${bootstrap[@]}"
tpl=$address
namespace='<namespace><template delimiter="/">
  <if test="matches" expression="bench/(\d+)" parameter="n">
    <value index="1" type="URL" data="https://example.org/item/${n[1]}"/>
    <value index="2" type="DESC" data="item ${n[1]} of ${base}"/>
  </if><else><notfound/></else>
</template></namespace>'
"$hdl" create 0.NA/BENCH --value "1:HS_NAMESPACE:$namespace" --server "$tpl" "${auth[@]}" >/dev/null
"$hdl" resolve BENCH/bench/7 --server "$tpl"
"$hdl" bench resolve --server "$tpl" --seed-at "$seed" --handles "${HANDLES:-1000}" \
    --duration "${DURATION:-8}" --misses 0 --server-pid "$(cat "$dir/tpl.pid")" "${auth[@]}"
