# Sourced by the benchmark scripts: `hdl serve` processes on loopback in a temporary
# directory, each with the test administrator of tests/fixtures, every one stopped and
# reaped (and the directory removed) on exit, whatever happened.
#
# Sets: root, hdl (HDL_BIN if set, else target/release/hdl), fixtures, dir, auth (the
# administrator's arguments for hdl commands), bootstrap (a node's arguments making
# that administrator), pin (a command and its arguments to start the nodes under, empty
# unless set, e.g. `pin=(taskset -c 0)`); start NAME ARGS…, ticks PID and cpu_per
# (below).

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hdl=${HDL_BIN:-$root/target/release/hdl}
fixtures=$root/tests/fixtures
dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
auth=(--auth 300:0.NA/ADMIN --secret-file "$fixtures/admin.secret")
pin=()
bootstrap=(--admin-secret-file "$fixtures/admin.secret" --prefix ADMIN --server-admin 300:0.NA/ADMIN)

# Starts `hdl serve NAME-ARGS…` on loopback, waits (10 s at most) for its
# announcement; sets $address (Handle protocol) and $http; its pid is in $dir/NAME.pid.
start() {
    local name=$1
    shift
    "${pin[@]}" "$hdl" serve --data-dir "$dir/$name" --listen 127.0.0.1:0 --http 127.0.0.1:0 "$@" \
        >"$dir/$name.out" 2>"$dir/$name.err" &
    pids+=($!)
    echo $! >"$dir/$name.pid"
    for _ in $(seq 100); do
        grep -q '^listening' "$dir/$name.out" && break
        sleep 0.1
    done
    grep -q '^listening' "$dir/$name.out" || { cat "$dir/$name.err"; exit 1; }
    address=$(sed -n 's/^listening handle=\([^ ]*\).*/\1/p' "$dir/$name.out")
    http=$(sed -n 's/.* http=\([^ ]*\).*/\1/p' "$dir/$name.out")
}

# Starts `hdl serve NAME-ARGS…` as `start` does, pinned to
# CPU 0 (the load goes on CPU 1); sets $pid too.
start_pinned() {
    [ "$(nproc)" -ge 2 ] || { echo "needs two CPUs: the server on 0, the load on 1" >&2; exit 1; }
    start "$@"
    pid=$(cat "$dir/$1.pid")
    taskset -a -p -c 0 "$pid" >/dev/null
}

# Prints process PID's CPU time so far, in clock ticks: user, then system.
ticks() {
    awk '{print $14, $15}' "/proc/$1/stat"
}

# Prints the CPU time between two `ticks` readings BEFORE and AFTER, per one of COUNT
# things done, in µs: the whole, then user, then system.
cpu_per() {
    awk -v before="$1" -v after="$2" -v n="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        split(before, b, " "); split(after, a, " "); per = 1e6 / hz / n
        user = (a[1] - b[1]) * per; sys = (a[2] - b[2]) * per
        printf "%.1f %.1f %.1f\n", user + sys, user, sys
    }'
}
