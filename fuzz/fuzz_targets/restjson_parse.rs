//! Fuzzes the REST JSON parser: any JSON body must parse or be refused without a
//! panic, and every value it accepts must come back the same from its own rendering
//! (real clients read a handle's values, change one and write them all back).

#![no_main]

use hdl::restjson::{parse_body, parse_value, value_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(body) = parse_body(&json) {
        for value in &body.values {
            let again = parse_value(&value_json(value)).expect("a rendered value parses");
            assert_eq!(&again, value);
        }
    }
});
