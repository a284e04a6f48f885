//! Creating a handle under a fresh random suffix: the Handle protocol's MINT flag on a
//! create and the REST API's `mintNewSuffix` (Handle.Net reference §1.2).
//!
//! The new handle is the base followed by a version-4 UUID: `P/<uuid>` for a bare
//! prefix `P`, `P/start<uuid>` for a base `P/start`. A clash with an existing handle
//! (122 random bits) is retried a few times with a new UUID; the create itself is an
//! ordinary one, authorised and replicated like any other.

use crate::names::Handle;
use crate::values::HandleValue;

use super::{Applied, Caller, Error, ExistingHandle, Handler, Operation, Refusal};

/// Attempts at a suffix that is not taken.
const MINT_ATTEMPTS: usize = 3;

/// Creates `base` followed by a random UUID with `values`, as `caller`, through
/// `handler` (the create is an ordinary [`Handler::administer`], routed like any other
/// to the owner of the new handle's slot); the handle created.
pub async fn mint_with<H: Handler + ?Sized>(
    handler: &H,
    caller: &Caller,
    base: &str,
    values: Vec<HandleValue>,
) -> Result<(Handle, Applied), Error> {
    let separator = if base.contains('/') { "" } else { "/" };
    for _ in 0..MINT_ATTEMPTS {
        let handle =
            Handle::parse(&format!("{base}{separator}{}", uuid())).map_err(Error::InvalidHandle)?;
        let operation = Operation::Create {
            handle: handle.clone(),
            values: values.clone(),
            existing: ExistingHandle::Refuse,
        };
        match handler.administer(caller, operation).await {
            Ok(applied) => return Ok((handle, applied)),
            Err(Error::Refused(Refusal::HandleExists)) => {}
            Err(error) => return Err(error),
        }
    }
    Err(Error::Refused(Refusal::HandleExists))
}

/// A random (version 4) UUID in its hyphenated form.
fn uuid() -> String {
    let bits =
        rand::random::<u128>() & !(0xf000 << 64) & !(0xc << 60) | (0x4000 << 64) | (0x8 << 60);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_suffixes_are_version_4_uuids() {
        let id = uuid();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(uuid(), id);
    }
}
