#!/usr/bin/env bash
# The tests, as CI runs them (README, "Quick start"): every test `cargo test --release`
# runs, in three steps that build less.
#
# 1. The unit tests, with hdl's own code unoptimised (its dependencies stay optimised;
#    only the override changes, so none is built again). Optimised, the library's
#    unit tests were CI's longest compile on 2 cores (490 s, cargo --timings).
#    Unoptimised they build in 82 s (99 s of CPU) and run in 21 s against 16 s; with
#    step 2, the build takes 516 s against 559 s for one optimised build of it all
#    (the same machine, one after the other).
# 2. The binary's unit tests and the integration tests, on the optimised `hdl`
#    binary: they start real servers and time what they see (failover, floods), so
#    they run what is shipped. The browser check (.ci/run) runs this binary too.
# 3. The documentation's examples, on the optimised library.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked --release --lib --config 'profile.release.package.hdl.opt-level=0'
cargo test --locked --release --bins --test '*'
cargo test --locked --release --doc
