#!/usr/bin/env bash
# Runs libFuzzer on each target:
#   scripts/fuzz.sh [--quick] [--runs N] [SECONDS] [TARGET...]
# for SECONDS each (default 60), or for N executions each with --runs.
# Targets (fuzz/fuzz_targets/): decode_message (Handle messages, TCP framing),
# udp_reassembly, restjson_parse, parse_reference, peer_frame; all of them by default.
#
# Built with the crate's pinned toolchain (no nightly needed) and no sanitizer: the
# crate forbids unsafe code, so AddressSanitizer would only watch the dependencies'
# unsafe code, at about 3.5 times the cost of an execution; overflow checks and debug
# assertions are on. A full build makes one codegen unit per crate, as cargo-fuzz
# does for speed per execution; --quick builds with 16 (the short run in CI), which
# compiles several times faster and executes somewhat slower.
# Installs cargo-fuzz from crates.io when it is missing. Each target's corpus is
# fuzz/corpus/<target>, seeded with a few valid inputs; a crash stops the script
# with the input in fuzz/artifacts/<target>/.
set -euo pipefail

build=()
limit=()
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) build=(--codegen-units 16); shift ;;
    --runs) limit=("-runs=$2"); shift 2 ;;
    *) break ;;
    esac
done
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(decode_message udp_reassembly restjson_parse parse_reference peer_frame)
fi
if [ ${#limit[@]} -eq 0 ]; then
    limit=("-max_total_time=$seconds")
fi
cd "$(dirname "$0")/.."

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# Writes the hex octets $2 to the file $1.
from_hex() {
    # shellcheck disable=SC2059 # the format is the octets themselves
    printf "$(sed 's/../\\x&/g' <<<"$2")" >"$1"
}

# Seeds each corpus so the fuzzer starts past the outer checks.
seed() {
    # The digest's §11.1 request: resolution of 0.NA/10.
    local request='020a020b0000000001020304000000000000002f000000010000000019000000000f00005f5e10000000001300000007302e4e412f3130000000000000000000000000'
    mkdir -p fuzz/corpus/{decode_message,udp_reassembly,restjson_parse,parse_reference,peer_frame}
    from_hex fuzz/corpus/decode_message/resolve-0.NA-10 "$request"
    from_hex fuzz/corpus/udp_reassembly/resolve-0.NA-10 "$request"
    printf '%s' '[{"index":1,"type":"URL","data":"https://example.org/"},{"index":100,"type":"HS_ADMIN","data":{"format":"admin","value":{"handle":"0.NA/T","index":"300","permissions":"011111110011"}}}]' \
        >fuzz/corpus/restjson_parse/url-and-admin.json
    printf '%s' 'hdl://127.0.0.1:2641/jis@cnri.test/%E6%97%A5' >fuzz/corpus/parse_reference/hdl-uri
    printf '%s' 'https://hdl.example/type=100@10.1000/1?x' >fuzz/corpus/parse_reference/proxy-url
    printf '%s' 'urn:hdl:10.1002/0002-8231(199601)47:1<1:SPOTEO>2.3.TX;2-K' >fuzz/corpus/parse_reference/urn
    # Destination::Group(Set(1)) then GroupCall::ReadIndex, as postcard encodes them.
    from_hex fuzz/corpus/peer_frame/read-index '00010104'
}

seed
flags=(--release --debug-assertions --sanitizer none "${build[@]}")
cargo fuzz build "${flags[@]}"
for target in "${targets[@]}"; do
    echo "== $target: ${limit[*]}"
    cargo fuzz run "${flags[@]}" "$target" "fuzz/corpus/$target" -- \
        "${limit[@]}" -print_final_stats=1
done
