#!/usr/bin/env bash
# The tests, as CI runs them (README, "Quick start"): every test `cargo test --release`
# runs, in three steps that build less.
#
# 1. The unit tests, with hdl's own code unoptimised (its dependencies stay optimised).
#    Built optimised, the library's unit tests were the longest compile of CI on 2
#    cores (490 s of the crate's 1,070 s of CPU, cargo --timings); unoptimised they
#    take about a tenth of that and run as fast (21 s against 16 s). Only the override
#    changes: no dependency is built again.
# 2. The binary's unit tests and the integration tests, on the optimised `hdl`
#    binary: they start real servers and time what they see (failover, floods), so
#    they run what is shipped. The browser check (.ci/run) runs this binary too.
# 3. The documentation's examples, on the optimised library.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked --release --lib --config 'profile.release.package.hdl.opt-level=0'
cargo test --locked --release --bins --test '*'
cargo test --locked --release --doc
