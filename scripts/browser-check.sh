#!/usr/bin/env bash
# Looks at the HTTP pages as a person would and checks what the browser rendered.
#
# In a temporary directory it bootstraps an administrator as the README says (`hdl
# keygen`, then `hdl serve --admin-key … --prefix TEST`, everything on 127.0.0.1),
# creates TEST/browser (a URL, a DESC holding markup, an EMAIL, a javascript: URL, an
# https URL holding markup) and TEST/日本 as that administrator with `hdl create`, and
# opens the pages in headless Chromium: a screenshot of each (front page, values page,
# native-script handle, /status, a 404) and assertions on the DOM it rendered
# (--dump-dom). Installs Debian's chromium and fonts-noto-cjk with apt-get when they
# are missing. The server is stopped and reaped on exit, whatever happened.
#
# The hdl binary: HDL_BIN if set (.ci/run passes the one `cargo test --release` just
# ran: a `cargo build --release` after the tests would rebuild hdl, since the tests'
# dev-dependencies turn on more features of shared crates), else `cargo build --release`.
#
# Usage: [HDL_BIN=PATH] scripts/browser-check.sh [OUTPUT_DIR]
#        (OUTPUT_DIR default: target/browser-check)
# Exit status: 0 every check passed; 1 a check failed (the message says which);
# 77 skipped: no Chromium and no way to install it (the message says why).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/browser-check}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

fail() {
    echo "browser check FAILED: $*" >&2
    exit 1
}

skip() {
    echo "browser check skipped: $*" >&2
    exit 77
}

# Runs a command as root: directly, or through sudo when that needs no password.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        return 1
    fi
}

find_browser() {
    command -v chromium || command -v chromium-browser || true
}

# The Debian packages this check needs that are not installed; a chromium on the PATH
# counts as installed.
missing_packages() {
    if [ -z "$(find_browser)" ]; then echo chromium; fi
    if ! dpkg -s fonts-noto-cjk >/dev/null 2>&1; then echo fonts-noto-cjk; fi
}

# Installs what is missing; skips the check when Chromium is missing and cannot be
# installed, and only warns when the CJK font cannot be.
install_missing() {
    local -a missing
    mapfile -t missing < <(missing_packages)
    [ "${#missing[@]}" -gt 0 ] || return 0
    local log why
    log="$(mktemp)"
    echo "browser check: installing ${missing[*]} with apt-get" >&2
    if ! command -v apt-get >/dev/null; then
        echo "no apt-get on this machine" >"$log"
    elif ! as_root true; then
        echo "apt-get needs root (or password-less sudo)" >"$log"
    elif as_root apt-get -o DPkg::Lock::Timeout=300 update -qq >"$log" 2>&1 &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 \
            install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
        rm -f "$log"
        return 0
    fi
    why="$(tail -n 3 "$log" | tr '\n' ' ')"
    why="${why% }"
    rm -f "$log"
    if [ -z "$(find_browser)" ]; then
        skip "Chromium is not installed and apt-get could not install ${missing[*]}: $why"
    fi
    echo "browser check: warning: no CJK font ($why); native script will show as boxes" >&2
}

install_missing
browser="$(find_browser)"

if [ -n "${HDL_BIN:-}" ]; then
    hdl="$(realpath -m "$HDL_BIN")"
else
    cargo build --release --locked --quiet
    hdl="$PWD/target/release/hdl"
fi
[ -x "$hdl" ] || fail "no hdl binary at $hdl"
work="$(mktemp -d)"
server_pid=""

# Stops the server (SIGTERM, SIGKILL after 10 s) and reaps it, then removes the work
# directory.
cleanup() {
    if [ -n "$server_pid" ]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# The administrator, exactly as the README's Administrators section makes one.
"$hdl" keygen --out "$work/admin.pem" >/dev/null 2>"$work/keygen.log" ||
    fail "hdl keygen failed: $(cat "$work/keygen.log")"
"$hdl" serve --data-dir "$work/data" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --peer 127.0.0.1:0 --admin-key "$work/admin.pem" --prefix TEST \
    >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
listening=""
for _ in $(seq 1 100); do
    listening="$(grep -m1 '^listening ' "$work/stdout" || true)"
    [ -n "$listening" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$listening" ] || fail "hdl serve did not start: $(cat "$work/stderr")"
handle_addr="$(sed -nE 's/.* handle=([^ ]+).*/\1/p' <<<"$listening")"
http="$(sed -nE 's/.* http=([^ ]+).*/\1/p' <<<"$listening")"

as_admin() {
    "$hdl" "$@" --server "$handle_addr" --auth 300:0.NA/TEST --key "$work/admin.pem" \
        >/dev/null || fail "hdl $* (as administrator 300:0.NA/TEST) failed"
}
markup='<script>document.title="not escaped"</script> <b>bold?</b> & "quotes"'
hostile_url='https://x.example/"><script>document.title="not escaped"</script>'
as_admin create TEST/browser --value 1:URL:https://example.org/ --value "2:DESC:$markup" \
    --value 3:EMAIL:hdl@example.org --value '4:URL:javascript:alert(1)' \
    --value "5:URL:$hostile_url"
as_admin create 'TEST/日本' --value '1:DESC:日本語の説明 (a value in Japanese: 日本)'

# Chromium, headless, on a fresh profile, kept off the network but for 127.0.0.1.
chrome() {
    local profile
    profile="$(mktemp -d "$work/profile.XXXXXX")"
    timeout -k 5 90 "$browser" --headless --no-sandbox --disable-gpu --disable-quic \
        --no-first-run --disable-background-networking --disable-component-update \
        --disable-sync --host-resolver-rules='MAP * ~NOTFOUND, EXCLUDE 127.0.0.1' \
        --user-data-dir="$profile" --window-size=1100,700 --hide-scrollbars "$@" \
        2>>"$work/chromium.log"
}

# Takes `name.png` of `path` and prints the DOM Chromium rendered for it.
look() {
    local name="$1" path="$2"
    rm -f "$out/$name.png"
    chrome --screenshot="$out/$name.png" "http://$http$path" >/dev/null ||
        fail "Chromium could not take $name.png: $(tail -n 5 "$work/chromium.log")"
    [ -s "$out/$name.png" ] || fail "Chromium wrote no $name.png"
    chrome --dump-dom "http://$http$path" ||
        fail "Chromium could not render $path: $(tail -n 5 "$work/chromium.log")"
}

# Asserts that the DOM of `page` contains (`has`) or lacks (`lacks`) a fixed string.
has() {
    grep -qF -- "$3" <<<"$2" || fail "$1: expected $3 in the rendered page"
}
lacks() {
    if grep -qF -- "$3" <<<"$2"; then fail "$1: found $3 in the rendered page"; fi
}

front="$(look front /)"
has "front page" "$front" '<form action="/" method="get">'
has "front page" "$front" '<input type="text" id="handle" name="handle"'

values="$(look values '/TEST/browser?noredirect')"
has "values page" "$values" '&lt;script&gt;document.title="not escaped"&lt;/script&gt;'
has "values page" "$values" '&lt;b&gt;bold?&lt;/b&gt; &amp; "quotes"'
lacks "values page" "$values" '<script'
lacks "values page" "$values" '<b>'
has "values page" "$values" '<title>Values of TEST/browser — hdl</title>'
has "values page" "$values" '<a href="https://example.org/" rel="noopener">https://example.org/</a>'
has "values page" "$values" '<td class="data">javascript:alert(1)</td>'
lacks "values page" "$values" 'href="javascript:'
has "values page" "$values" '<a href="https://x.example/%22%3E%3Cscript%3Edocument.title=%22not%20escaped%22%3C/script%3E" rel="noopener">'
has "values page" "$values" 'administrator: 0.NA/TEST (index 300)'
has "values page" "$values" 'admin read, admin write, public read'
grep -qE '<td class="when">[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z</td>' <<<"$values" ||
    fail "values page: no ISO 8601 timestamp"

native="$(look native '/TEST/%E6%97%A5%E6%9C%AC')"
has "native-script page" "$native" '<h1>Values of TEST/日本</h1>'
has "native-script page" "$native" '<code>TEST/日本</code>'
has "native-script page" "$native" '日本語の説明 (a value in Japanese: 日本)'

status="$(look status /status)"
node="$(sed -nE 's|.*<th>Node</th><td>([0-9]+) \(primary\)</td>.*|\1|p' <<<"$status")"
[ -n "$node" ] || fail "status page: this lone node is not shown as primary"
has "status page" "$status" "<th>Primary</th><td>node $node</td>"

not_found="$(look not-found /TEST/no-such-handle)"
has "404 page" "$not_found" '<h1>Handle not found</h1>'
has "404 page" "$not_found" 'The handle TEST/no-such-handle does not exist.'
code="$(curl -s -o /dev/null -w '%{http_code}' "http://$http/TEST/no-such-handle")"
[ "$code" = 404 ] || fail "404 page: answered HTTP $code"

echo "browser check passed; screenshots:"
for name in front values native status not-found; do echo "  $out/$name.png"; done
