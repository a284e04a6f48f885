//! Handle values: the data model, its RFC 3652 byte encoding, the data layouts of the
//! well-known types, and the registry that validates them.
//!
//! - [`wire`]: the primitive shapes (`u8`…`u64`, `Str`, `Bytes`, `List`) and
//!   [`DecodeError`].
//! - [`value`]: [`HandleValue`] and its encoding (digest §5).
//! - [`known`]: one file per data layout (HS_ADMIN, HS_SITE, HS_VLIST, HS_PUBKEY, and
//!   the handle-naming HS_ALIAS/HS_SERV), each with `decode`/`encode` (digest §6).
//! - [`namespace`]: HS_NAMESPACE templates: the XML parsed, and the values a template
//!   derives for a handle from its base handle's values.
//! - [`select`]: [`ValueSelection`], the index/type filter of a resolution.
//! - [`search`]: [`SearchQuery`], the `TYPE=PATTERN` terms of a reverse lookup.
//! - [`types`]: [`KnownType`], [`validate`], and the permission rules for
//!   administrative types (DESIGN §2).
//!
//! Depends on nothing else in the crate. Pure: no I/O, no clock, no storage.
//! Everything that stores or sends values goes through [`HandleValue::encode`] and
//! [`HandleValue::decode`], so the byte format is defined in exactly one place; every
//! decoder here refuses trailing octets except the J9 quirks its file documents.

pub mod known;
pub mod namespace;
pub mod search;
pub mod select;
pub mod types;
pub mod value;
pub mod wire;

#[cfg(test)]
mod proptests;

pub use known::{
    AdminGroup, AdminPermissions, AdminPermissionsParseError, AdminRecord, HandleTarget,
    HashOption, Interface, InterfaceKind, InterfaceProtocol, PublicKey, ServerRecord, SiteFlags,
    SiteInfo, ValueList,
};
pub use search::{SearchError, SearchQuery, SearchTerm, ValuePattern};
pub use select::ValueSelection;
pub use types::{
    InvalidValue, KnownType, MAX_TYPE_NAME_LEN, check_permissions, default_permissions, validate,
};
pub use value::{
    HandleValue, Permissions, Ttl, ValueIndex, ValueReference, decode_value_list,
    encode_value_list, value_list_len,
};
pub use wire::{DecodeError, Reader, Writer};
