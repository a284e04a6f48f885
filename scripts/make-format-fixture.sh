#!/usr/bin/env bash
# Makes tests/fixtures/earlier-releases/<NAME>/ (NAME: the commit HDL was built from): the
# data directory of a lone `hdl serve` run by the hdl binary HDL (a release about to be
# superseded), holding handles written through every kind of change, and `expected.jsonl`,
# that node's `hdl export`. The integration test `upgrades` opens every such fixture with
# the current hdl and checks it exports the same. Run it with the last
# release's binary before changing the store's or the log's format:
#
#     HDL=path/to/old/hdl scripts/make-format-fixture.sh COMMIT
#
# Everything runs on 127.0.0.1, on fixed ports below the ephemeral range (a set records its
# members' peer addresses, so the test starts the node on the same ones: `serve-args`, with
# the server administrator, which is configuration, not data);
# the node is stopped with SIGTERM and its data kept.
set -euo pipefail
name=${1:?usage: HDL=path/to/hdl scripts/make-format-fixture.sh NAME}
hdl=${HDL:?set HDL to the hdl binary of the release that writes the fixture}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=$root/tests/fixtures
out=$fixtures/earlier-releases/$name
[ -e "$out" ] && { echo "$out exists: remove it first" >&2; exit 1; }

serve_args="--listen 127.0.0.1:23641 --peer 127.0.0.1:23651 --server-admin 300:0.NA/ADMIN"
work=$(mktemp -d)
trap 'kill "$node" 2>/dev/null || true; wait "$node" 2>/dev/null || true; rm -rf "$work"' EXIT
data=$work/data
# shellcheck disable=SC2086 # $serve_args is a list of arguments
"$hdl" serve --data-dir "$data" $serve_args --http 127.0.0.1:0 \
    --admin-secret-file "$fixtures/admin.secret" --prefix ADMIN \
    > "$work/serve.log" 2> "$work/serve.err" &
node=$!
for _ in $(seq 100); do
    grep -q 'listening' "$work/serve.log" && break
    sleep 0.1
done
line=$(grep -m1 'listening' "$work/serve.log") || { cat "$work/serve.err" >&2; exit 1; }
handle=$(sed -E 's/.*handle=([0-9.:]+).*/\1/' <<< "$line")
peer=$(sed -E 's/.*peer=([0-9.:]+).*/\1/' <<< "$line")
admin=(--auth 300:0.NA/ADMIN --secret-file "$fixtures/admin.secret")
server=(--server "$handle" "${admin[@]}")

"$hdl" create ADMIN/plain --value 1:URL:https://example.org/plain "${server[@]}"
"$hdl" create 'ADMIN/Mixed-Case/日本' --value '1:URL:https://example.org/a b' \
    --value 2:EMAIL:hdl@example.org --value 3:DESC:description "${server[@]}"
"$hdl" create ADMIN/modified --value 1:URL:https://example.org/before "${server[@]}"
"$hdl" modify ADMIN/modified --value 1:URL:https://example.org/after "${server[@]}"
"$hdl" create ADMIN/grown --value 1:URL:https://example.org/one "${server[@]}"
"$hdl" add ADMIN/grown --value 2:EMAIL:two@example.org --value 3:URL:https://example.org/three \
    "${server[@]}"
"$hdl" remove ADMIN/grown --index 3 "${server[@]}"
"$hdl" create ADMIN/deleted --value 1:URL:https://example.org/gone "${server[@]}"
"$hdl" delete ADMIN/deleted "${server[@]}"
for i in $(seq 1 50); do
    echo "create ADMIN/batch-$i --value 1:URL:https://example.org/batch/$i"
done > "$work/batch.txt"
"$hdl" batch "$work/batch.txt" "${server[@]}" > /dev/null

"$hdl" export --peer "$peer" --cluster-secret-file "$data/cluster.secret" "${admin[@]}" \
    > "$work/expected.jsonl"
kill -TERM "$node"
wait "$node" || true
mkdir -p "$out"
cp -a "$data" "$out/data"
cp "$work/expected.jsonl" "$out/expected.jsonl"
echo "$serve_args" > "$out/serve-args"
"$hdl" --version > "$out/written-by"
echo "wrote $out ($(du -sh "$out" | cut -f1))"
