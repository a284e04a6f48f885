//! Fuzzes the handle reference parser: any octets must parse or be refused without a
//! panic, and the handle of every accepted reference is a valid handle by itself.

#![no_main]

use hdl::names::{Handle, HandleRef};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(reference) = HandleRef::parse(data) {
        let handle = Handle::parse(reference.handle.as_str()).expect("the handle parses alone");
        assert_eq!(handle, reference.handle);
    }
});
