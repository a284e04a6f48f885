//! The authentication options: `--auth INDEX:HANDLE` with `--key FILE.pem` or
//! `--secret-file FILE` for the client commands, and `--admin-key` or
//! `--admin-secret-file` with `--prefix` for the bootstrap administrator of
//! `hdl serve`, `hdl cluster init` and `hdl cluster up` (`serve` and `up` make one for
//! a new data directory when none is given: [`super::default_admin`]).
//!
//! A secret file holds the HS_SECKEY octets; one trailing newline is dropped, so
//! `echo s3cret > FILE` works. A key file is a PEM RSA private key (PKCS#8 or PKCS#1),
//! as `hdl keygen` writes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::auth::{Identity, SecretKey, SigningKey};
use crate::client::{Credentials, Key};
use crate::service::bootstrap::BootstrapAdmin;
use anyhow::{Context, bail};
use base64::Engine;
use clap::Args;

use super::default_admin;

/// Parses `INDEX:HANDLE` (a clap value parser).
pub fn parse_identity(text: &str) -> Result<Identity, String> {
    crate::config::parse_identity(text)
        .ok_or_else(|| format!("{text:?} is not INDEX:HANDLE, e.g. 300:0.NA/TEST"))
}

/// The options naming an administrator for client commands.
#[derive(Debug, Args)]
pub struct AuthArgs {
    /// Authenticate as this administrator, `INDEX:HANDLE` (e.g. `300:0.NA/TEST`),
    /// with --key or --secret-file.
    #[arg(long, value_name = "INDEX:HANDLE", value_parser = parse_identity)]
    auth: Option<Identity>,
    /// PEM private key whose public half is the identity's HS_PUBKEY.
    #[arg(
        long,
        value_name = "FILE",
        requires = "auth",
        conflicts_with = "secret_file"
    )]
    key: Option<PathBuf>,
    /// File holding the identity's HS_SECKEY secret.
    #[arg(long, value_name = "FILE", requires = "auth")]
    secret_file: Option<PathBuf>,
}

impl AuthArgs {
    /// The credentials given, if any.
    pub fn credentials(&self) -> anyhow::Result<Option<Credentials>> {
        let Some(identity) = self.auth.clone() else {
            return Ok(None);
        };
        let key = match (&self.key, &self.secret_file) {
            (Some(path), _) => Key::Public(Arc::new(read_key(path)?)),
            (None, Some(path)) => Key::Secret(SecretKey(read_secret(path)?)),
            (None, None) => bail!("--auth needs --key FILE.pem or --secret-file FILE"),
        };
        Ok(Some(Credentials { identity, key }))
    }

    /// The HTTP `Authorization: Basic` value for these credentials (a secret key:
    /// Basic carries the HS_SECKEY itself), if any.
    pub fn basic_header(&self) -> anyhow::Result<Option<String>> {
        let Some(identity) = &self.auth else {
            return Ok(None);
        };
        let Some(path) = &self.secret_file else {
            bail!("HTTP Basic authentication needs --secret-file");
        };
        let mut credentials = format!("{}%3A{}:", identity.index, identity.handle).into_bytes();
        credentials.extend(read_secret(path)?);
        let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
        Ok(Some(format!("Basic {encoded}")))
    }

    /// The identity given, if any.
    pub fn identity(&self) -> Option<&Identity> {
        self.auth.as_ref()
    }
}

/// The options creating the first administrator of a new store.
#[derive(Debug, Args)]
pub struct BootstrapArgs {
    /// On a new store, create `0.NA/<prefix>` for each --prefix with this PEM key's
    /// public half as HS_PUBKEY at index 300 and an HS_ADMIN granting everything to
    /// `300:0.NA/<prefix>`. Without it or --admin-secret-file, `hdl serve` and
    /// `hdl cluster up` make a key in a new data directory (`admin.pem`) and use it.
    #[arg(long, value_name = "FILE.pem", conflicts_with = "admin_secret_file")]
    admin_key: Option<PathBuf>,
    /// As --admin-key, with the secret in this file as HS_SECKEY.
    #[arg(long, value_name = "FILE")]
    admin_secret_file: Option<PathBuf>,
    /// A prefix the bootstrap administrator administers (repeatable); `hdl serve` and
    /// `hdl cluster up` default to `ADMIN` for the key they make.
    #[arg(long = "prefix", value_name = "PREFIX")]
    prefixes: Vec<String>,
}

/// Where the administrator of a new set may be made when none is given.
#[derive(Debug, Clone, Copy)]
pub struct DataDir<'a> {
    /// The directory (the node's, or that of the set `hdl cluster up` runs).
    pub path: &'a Path,
    /// Whether other users may enter it (`allow_shared_data_dir`).
    pub allow_shared: bool,
}

/// The bootstrap administrator and, when it is the one of the data directory, its
/// key file.
#[derive(Debug)]
pub struct Administrator {
    /// What to bootstrap.
    pub bootstrap: Bootstrap,
    /// The key file of the administrator of the data directory; `None` for one given.
    pub key_file: Option<PathBuf>,
}

impl Administrator {
    /// Prints the options that authenticate a client command as the administrator of
    /// the data directory ([`default_admin::print_options`]); nothing for one given,
    /// whose key its operator knows.
    pub fn print_options(&self) -> anyhow::Result<()> {
        match &self.key_file {
            Some(file) => default_admin::print_options(file, &self.bootstrap.prefixes),
            None => Ok(()),
        }
    }
}

/// What to bootstrap.
#[derive(Debug)]
pub struct Bootstrap {
    /// The administrator's key.
    pub admin: BootstrapAdmin,
    /// The prefixes.
    pub prefixes: Vec<String>,
}

impl BootstrapArgs {
    /// Whether any bootstrap option was given.
    pub fn is_given(&self) -> bool {
        self.admin_key.is_some() || self.admin_secret_file.is_some() || !self.prefixes.is_empty()
    }

    /// The bootstrap asked for, if any.
    pub fn bootstrap(&self) -> anyhow::Result<Option<Bootstrap>> {
        let admin = match (&self.admin_key, &self.admin_secret_file) {
            (Some(path), _) => BootstrapAdmin::PublicKey(read_key(path)?.public_key().encode()),
            (None, Some(path)) => BootstrapAdmin::SecretKey(read_secret(path)?),
            (None, None) if self.prefixes.is_empty() => return Ok(None),
            (None, None) => bail!("--prefix needs --admin-key or --admin-secret-file"),
        };
        if self.prefixes.is_empty() {
            bail!("--admin-key and --admin-secret-file need at least one --prefix");
        }
        Ok(Some(Bootstrap {
            admin,
            prefixes: self.prefixes.clone(),
        }))
    }

    /// The administrator given or, when none is and `data_dir` is named, that of
    /// `data_dir` (made when it is new, for the prefixes given or `ADMIN`; see
    /// [`default_admin`]); `None` when there is neither.
    pub fn administrator(
        &self,
        data_dir: Option<DataDir<'_>>,
    ) -> anyhow::Result<Option<Administrator>> {
        let given = self.admin_key.is_some() || self.admin_secret_file.is_some();
        let Some(dir) = data_dir.filter(|_| !given) else {
            let bootstrap = self.bootstrap()?;
            return Ok(bootstrap.map(|bootstrap| Administrator {
                bootstrap,
                key_file: None,
            }));
        };
        let Some((key_file, key)) = default_admin::load_or_make(dir.path, dir.allow_shared)? else {
            return Ok(None);
        };
        let prefixes = if self.prefixes.is_empty() {
            vec![default_admin::DEFAULT_PREFIX.to_owned()]
        } else {
            self.prefixes.clone()
        };
        Ok(Some(Administrator {
            bootstrap: Bootstrap {
                admin: BootstrapAdmin::PublicKey(key.public_key().encode()),
                prefixes,
            },
            key_file: Some(key_file),
        }))
    }
}

/// Reads a PEM private key.
pub fn read_key(path: &Path) -> anyhow::Result<SigningKey> {
    let pem = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read key {}", path.display()))?;
    SigningKey::from_pem(&pem).with_context(|| format!("invalid key in {}", path.display()))
}

/// Reads a secret, without one trailing newline.
fn read_secret(path: &Path) -> anyhow::Result<Vec<u8>> {
    let mut secret =
        std::fs::read(path).with_context(|| format!("cannot read secret {}", path.display()))?;
    if secret.ends_with(b"\n") {
        secret.pop();
        if secret.ends_with(b"\r") {
            secret.pop();
        }
    }
    if secret.is_empty() {
        bail!("the secret in {} is empty", path.display());
    }
    Ok(secret)
}
