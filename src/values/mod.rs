//! Handle values: the data model, its RFC 3652 byte encoding, and the registry of
//! known value types.
//!
//! Depends on nothing else in the crate but [`crate::names`]. Pure: no I/O, no
//! clock, no storage. Everything that stores or sends values goes through
//! [`HandleValue::encode`] and [`HandleValue::decode`], so the byte format is defined
//! in exactly one place.

pub mod value;
pub mod wire;

pub use value::{
    HandleValue, Permissions, Ttl, ValueIndex, ValueReference, decode_value_list, encode_value_list,
};
pub use wire::{DecodeError, Reader, Writer};
