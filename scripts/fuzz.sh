#!/usr/bin/env bash
# Runs the codec fuzz target for N seconds (default 60): scripts/fuzz.sh [SECONDS]
# Needs the nightly toolchain; installs cargo-fuzz from crates.io when it is missing.
set -euo pipefail

seconds="${1:-60}"
cd "$(dirname "$0")/.."

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# Seed the corpus with the digest's §11.1 request so the fuzzer starts past the envelope.
corpus=fuzz/corpus/decode_message
mkdir -p "$corpus"
request='020a020b0000000001020304000000000000002f000000010000000019000000000f00005f5e10000000001300000007302e4e412f3130000000000000000000000000'
# shellcheck disable=SC2059 # the format is the octets themselves
printf "$(sed 's/../\\x&/g' <<<"$request")" >"$corpus/resolve-0.NA-10"

cargo +nightly fuzz run decode_message "$corpus" -- -max_total_time="$seconds"
