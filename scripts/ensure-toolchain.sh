#!/usr/bin/env bash
# Makes sure the toolchain pinned in rust-toolchain.toml (with rustfmt and clippy) is
# installed. No network but the package registries is reachable, so rustup cannot
# download it: when the machine's stable toolchain is that exact version, it is linked
# under the pinned name.
set -euo pipefail
cd "$(dirname "$0")/.."
pinned=$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)
if rustup run "$pinned" rustc --version >/dev/null 2>&1; then
  exit 0
fi
stable=$(rustup run stable rustc --version | awk '{print $2}')
if [ "$stable" != "$pinned" ]; then
  echo "ensure-toolchain: need Rust $pinned; this machine's stable is $stable" >&2
  exit 1
fi
host=$(rustup run stable rustc -vV | sed -n 's/^host: //p')
toolchains="${RUSTUP_HOME:-$HOME/.rustup}/toolchains"
ln -sfn "stable-$host" "$toolchains/$pinned-$host"
rustup run "$pinned" rustc --version
