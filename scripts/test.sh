#!/usr/bin/env bash
# The tests, as CI runs them (README, "Quick start"): every test `cargo test --release`
# runs, in three steps that build less.
#
# 1. The library's unit tests (the CLI's among them: it is the library's top module),
#    with hdl's own code unoptimised (its dependencies stay optimised; only the
#    override changes, so none is built again). Optimised, they were CI's longest
#    compile on 2 cores (490 s, cargo --timings); unoptimised they build in 61-70 s
#    and run in 16-18 s.
# 2. The integration tests, on the optimised `hdl` binary (`--bins` builds it; it
#    has no tests of its own): they start real servers and time what they see
#    (failover, floods), so they run what is shipped. The optimised library is the
#    long pole here (170 s of the 196 s build, cargo --timings). The browser check
#    (.ci/run) runs this binary too.
# 3. The documentation's examples, on the optimised library.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked --release --lib --config 'profile.release.package.hdl.opt-level=0'
cargo test --locked --release --bins --test '*'
cargo test --locked --release --doc
