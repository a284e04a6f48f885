//! The first administrator of a new store, written without prompts (issue 6, part 5).
//!
//! Owns [`BootstrapAdmin`] and [`Service::bootstrap`]: for each prefix `P`, the prefix
//! handle `0.NA/P` with an HS_ADMIN value (index 100) granting every permission to
//! `300:0.NA/P` and the administrator's key at index 300 (HS_PUBKEY, or HS_SECKEY
//! readable by administrators only). Handles that exist already are left alone, so a
//! restart with the same options changes nothing.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::names::{Handle, prefix_handle};
use crate::replication::GroupError;
use crate::values::{AdminPermissions, AdminRecord, HandleValue, default_permissions};

use super::{Applied, Error, ExistingHandle, Operation, Refusal, Service};

/// The index of the HS_ADMIN value of a bootstrapped prefix handle.
pub const ADMIN_VALUE_INDEX: u32 = 100;
/// The index of the administrator's key in a bootstrapped prefix handle.
pub const KEY_VALUE_INDEX: u32 = 300;
/// How long the bootstrap waits for its replica set to elect a primary.
const LEADER_PATIENCE: Duration = Duration::from_secs(30);

/// The key of the first administrator, as its value's data.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BootstrapAdmin {
    /// HS_PUBKEY data (the public half of the administrator's key pair).
    PublicKey(Vec<u8>),
    /// HS_SECKEY data (the shared secret).
    SecretKey(Vec<u8>),
}

impl std::fmt::Debug for BootstrapAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BootstrapAdmin::PublicKey(_) => "BootstrapAdmin::PublicKey(..)",
            BootstrapAdmin::SecretKey(_) => "BootstrapAdmin::SecretKey(..)",
        })
    }
}

impl BootstrapAdmin {
    /// The values of the prefix handle `handle` (`0.NA/P`).
    pub fn values(&self, handle: &Handle) -> Vec<HandleValue> {
        let admin = AdminRecord {
            permissions: AdminPermissions::ALL,
            admin_handle: handle.as_str().to_owned(),
            admin_index: KEY_VALUE_INDEX,
            legacy_padding: false,
        };
        let (key_type, data) = match self {
            BootstrapAdmin::PublicKey(data) => ("HS_PUBKEY", data.clone()),
            BootstrapAdmin::SecretKey(data) => ("HS_SECKEY", data.clone()),
        };
        [
            HandleValue::new(ADMIN_VALUE_INDEX, "HS_ADMIN", admin.encode()),
            HandleValue::new(KEY_VALUE_INDEX, key_type, data),
        ]
        .into_iter()
        .map(|value| HandleValue {
            permissions: default_permissions(&value.value_type),
            ..value
        })
        .collect()
    }
}

impl Service {
    /// Creates `0.NA/<prefix>` for each of `prefixes` that does not exist, through the
    /// replica set, waiting for it to have a primary. Returns the handles created.
    pub async fn bootstrap(
        &self,
        admin: &BootstrapAdmin,
        prefixes: &[String],
    ) -> Result<Vec<Handle>, Error> {
        let mut created = Vec::new();
        for prefix in prefixes {
            let handle = prefix_handle(prefix).map_err(Error::InvalidHandle)?;
            if self.store.read()?.contains(&handle)? {
                continue;
            }
            let operation = Operation::Create {
                values: admin.values(&handle),
                handle: handle.clone(),
                existing: ExistingHandle::Refuse,
            };
            match self.write_when_led(operation).await {
                Ok(_) => created.push(handle),
                Err(Error::Refused(Refusal::HandleExists)) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(created)
    }

    /// Writes `operation`, retrying while the set has no primary yet.
    async fn write_when_led(&self, operation: Operation) -> Result<Applied, Error> {
        let deadline = tokio::time::Instant::now() + LEADER_PATIENCE;
        loop {
            match self.write(operation.clone()).await {
                Err(Error::Replication(error))
                    if matches!(*error, GroupError::NoLeader { .. })
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => return other,
            }
        }
    }
}
