//! `hdl keygen --out FILE.pem [--index N]`: a new RSA key pair for an administrator.
//!
//! Writes the private key as PEM with mode 0600 (refusing to overwrite a file) and
//! prints the public half as a `--value` for `hdl create` or `hdl add`:
//! `300:HS_PUBKEY:<hex of the HS_PUBKEY data>`. [`write_new_key`] is also how
//! `hdl cluster up` and `hdl serve` make the administrator of a new data directory.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::auth::SigningKey;
use crate::auth::keys::GENERATED_KEY_BITS;
use anyhow::Context;
use clap::Args;

/// Arguments of `hdl keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the private key (PEM, mode 0600); must not exist.
    #[arg(long, value_name = "FILE.pem")]
    out: PathBuf,
    /// The value index printed with the public key.
    #[arg(long, default_value_t = 300, value_parser = super::value_arg::parse_index)]
    index: u32,
}

/// Generates the key, writes it and prints the HS_PUBKEY value.
pub fn run(args: &KeygenArgs) -> anyhow::Result<()> {
    let key = write_new_key(&args.out)?;
    let hex: String = key
        .public_key()
        .encode()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("{}:HS_PUBKEY:{hex}", args.index);
    Ok(())
}

/// Generates an RSA key and writes it to `path` as PEM with mode 0600, refusing to
/// overwrite a file; says so on stderr.
pub fn write_new_key(path: &Path) -> anyhow::Result<SigningKey> {
    let key = SigningKey::generate().context("cannot generate a key")?;
    let pem = key.to_pem().context("cannot encode the key")?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(pem.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "wrote a {GENERATED_KEY_BITS}-bit RSA private key to {}",
        path.display()
    );
    Ok(key)
}
