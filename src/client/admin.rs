//! Administrative requests (digest §3.4, §3.6): create, delete, add, modify and
//! remove, and homing prefixes (home, unhome, list the homed ones).
//!
//! Owns [`AdminRequest`] and [`Overwrite`], and their translation into a codec
//! [`Request`] with its OpFlags. Pure.

use crate::codec::{HandleValues, OpFlags, Request};
use crate::names::Handle;
use crate::values::{HandleValue, ValueIndex};

/// What a create or an add does when the handle or a value index exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overwrite {
    /// Fail with 101 (handle already exists).
    #[default]
    Refuse,
    /// Replace the handle's values, or the value at that index (the
    /// OverwriteWhenExists flag).
    Replace,
}

/// An administrative request; the client sends it over TCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRequest {
    /// OC 100: create `handle` with `values`.
    Create {
        /// The handle.
        handle: Handle,
        /// Its values.
        values: Vec<HandleValue>,
        /// What to do if it exists.
        overwrite: Overwrite,
    },
    /// OC 100 with MINT: create `base` followed by a random suffix the server picks
    /// (`P/<uuid>` for a bare prefix `P`) with `values`; the success response names
    /// the handle created.
    Mint {
        /// The prefix, or `prefix/start`.
        base: String,
        /// The values.
        values: Vec<HandleValue>,
    },
    /// OC 101: delete a handle.
    Delete {
        /// The handle.
        handle: Handle,
    },
    /// OC 102: add values (their indexes must be free unless `overwrite` replaces).
    AddValues {
        /// The handle.
        handle: Handle,
        /// The values to add.
        values: Vec<HandleValue>,
        /// What to do with a value whose index is taken.
        overwrite: Overwrite,
    },
    /// OC 104: replace values, matched by index.
    ModifyValues {
        /// The handle.
        handle: Handle,
        /// The new values.
        values: Vec<HandleValue>,
    },
    /// OC 103: remove the values with these indexes.
    RemoveValues {
        /// The handle.
        handle: Handle,
        /// The indexes.
        indexes: Vec<ValueIndex>,
    },
    /// OC 300: the server serves the prefix of `prefix` (`0.NA/<prefix>`) from now.
    Home {
        /// The prefix handle.
        prefix: Handle,
    },
    /// OC 301: the server no longer serves the prefix of `prefix`.
    Unhome {
        /// The prefix handle.
        prefix: Handle,
    },
    /// OC 302: the prefix handles of the prefixes the server serves (the success
    /// response is a list of handles).
    ListHomed,
}

impl AdminRequest {
    /// The handle the request changes (the prefix handle of a prefix homed or
    /// unhomed); `None` for a mint, whose handle the server picks, and a listing.
    pub fn handle(&self) -> Option<&Handle> {
        match self {
            AdminRequest::Create { handle, .. }
            | AdminRequest::Delete { handle }
            | AdminRequest::AddValues { handle, .. }
            | AdminRequest::ModifyValues { handle, .. }
            | AdminRequest::RemoveValues { handle, .. }
            | AdminRequest::Home { prefix: handle }
            | AdminRequest::Unhome { prefix: handle } => Some(handle),
            AdminRequest::Mint { .. } | AdminRequest::ListHomed => None,
        }
    }

    /// The request body and its OpFlags: J9's defaults, plus OW for a create that
    /// replaces and MINT for a mint.
    pub fn into_wire(self) -> (Request, OpFlags) {
        let values = |handle: Handle, values| HandleValues {
            handle: handle.as_str().as_bytes().to_vec(),
            values,
        };
        let mut flags = OpFlags::J9_DEFAULT;
        let request = match self {
            AdminRequest::Create {
                handle,
                values: list,
                overwrite,
            } => {
                if overwrite == Overwrite::Replace {
                    flags = flags | OpFlags::OW;
                }
                Request::CreateHandle(values(handle, list))
            }
            AdminRequest::Mint { base, values } => {
                flags = flags | OpFlags::MINT;
                Request::CreateHandle(HandleValues {
                    handle: base.into_bytes(),
                    values,
                })
            }
            AdminRequest::Delete { handle } => Request::DeleteHandle {
                handle: handle.as_str().as_bytes().to_vec(),
            },
            AdminRequest::AddValues {
                handle,
                values: v,
                overwrite,
            } => {
                if overwrite == Overwrite::Replace {
                    flags = flags | OpFlags::OW;
                }
                Request::AddValue(values(handle, v))
            }
            AdminRequest::ModifyValues { handle, values: v } => {
                Request::ModifyValue(values(handle, v))
            }
            AdminRequest::RemoveValues { handle, indexes } => Request::RemoveValue {
                handle: handle.as_str().as_bytes().to_vec(),
                indexes,
            },
            AdminRequest::Home { prefix } => Request::HomeNa {
                prefix: prefix.as_str().as_bytes().to_vec(),
            },
            AdminRequest::Unhome { prefix } => Request::UnhomeNa {
                prefix: prefix.as_str().as_bytes().to_vec(),
            },
            AdminRequest::ListHomed => Request::ListHomedNas {
                handle: b"/".to_vec(),
            },
        };
        (request, flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::OpCode;

    fn handle() -> Handle {
        Handle::parse("TEST/1").unwrap()
    }

    #[test]
    fn only_a_replacing_create_carries_overwrite() {
        let values = vec![HandleValue::new(1, "URL", "https://example.org/")];
        let create = |overwrite| AdminRequest::Create {
            handle: handle(),
            values: values.clone(),
            overwrite,
        };
        let (request, flags) = create(Overwrite::Replace).into_wire();
        assert_eq!(request.opcode(), OpCode::CreateHandle);
        assert_eq!(flags, OpFlags::J9_DEFAULT | OpFlags::OW);
        let (_, flags) = create(Overwrite::Refuse).into_wire();
        assert_eq!(flags, OpFlags::J9_DEFAULT);
        let (request, flags) = AdminRequest::RemoveValues {
            handle: handle(),
            indexes: vec![ValueIndex(2)],
        }
        .into_wire();
        assert_eq!(flags, OpFlags::J9_DEFAULT);
        assert_eq!(
            request,
            Request::RemoveValue {
                handle: b"TEST/1".to_vec(),
                indexes: vec![ValueIndex(2)]
            }
        );
    }
}
