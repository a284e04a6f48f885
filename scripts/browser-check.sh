#!/usr/bin/env bash
# Looks at the HTTP pages as a person would: builds a release hdl, starts
# `hdl serve --http 127.0.0.1:0` in a temporary directory, creates a handle over the
# JSON API (one value holds markup, which must show escaped), and takes headless
# Chromium screenshots of the front page and of /<handle>?noredirect.
# Installs Debian's chromium with apt-get when it is missing. Not part of the tests.
#
# Usage: scripts/browser-check.sh [OUTPUT_DIR]   (default: target/browser-check)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/browser-check}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    browser="$(command -v chromium)"
fi

cargo build --release --quiet
work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

target/release/hdl serve --data-dir "$work/data" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
http=""
for _ in $(seq 1 100); do
    http="$(sed -nE 's/^listening handle=[^ ]+ http=([^ ]+).*/\1/p' "$work/stdout")"
    [ -n "$http" ] && break
    sleep 0.1
done
[ -n "$http" ] || { echo "hdl serve did not start:" >&2; cat "$work/stderr" >&2; exit 1; }

curl -sf -X PUT -H 'Content-Type: application/json' "http://$http/api/handles/TEST/browser" \
    -d '[{"index":1,"type":"URL","data":"https://example.org/"},
         {"index":2,"type":"DESC","data":"<script>alert(\"not escaped\")</script> <b>bold?</b>"},
         {"index":3,"type":"EMAIL","data":"hdl@example.org"}]' >/dev/null

shoot() {
    "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run \
        --user-data-dir="$work/profile" --window-size=1100,700 \
        --screenshot="$1" "$2" >/dev/null 2>&1
}
shoot "$out/front.png" "http://$http/"
shoot "$out/values.png" "http://$http/TEST/browser?noredirect"
echo "screenshots: $out/front.png $out/values.png"
