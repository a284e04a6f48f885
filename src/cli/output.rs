//! How resolved values are shown: the Handle.Net REST JSON shape (rendered by
//! [`crate::restjson`], shared with the HTTP API) and one text line per value.

use crate::values::HandleValue;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub use crate::restjson::resolution_json;

/// One value as a text line: `index type data`, HS_ADMIN data written as
/// `INDEX:PERMISSIONS:HANDLE` (the form `--value` takes), text as itself, any other
/// data in base64.
pub fn value_line(value: &HandleValue) -> String {
    let data = crate::restjson::data_json(value);
    let shown = match (data["format"].as_str(), &data["value"]) {
        (Some("admin"), admin) => format!(
            "{}:{}:{}",
            admin["index"],
            admin["permissions"].as_str().unwrap_or_default(),
            admin["handle"].as_str().unwrap_or_default()
        ),
        (Some("string"), text) => text.as_str().unwrap_or_default().to_owned(),
        _ => STANDARD.encode(&value.data),
    };
    format!("{} {} {shown}", value.index, value.value_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{AdminPermissions, AdminRecord, Permissions};

    #[test]
    fn lines_show_admin_text_and_binary_data() {
        let record = AdminRecord {
            permissions: "011111110011".parse::<AdminPermissions>().unwrap(),
            admin_handle: "0.NA/TEST".into(),
            admin_index: 300,
            legacy_padding: false,
        };
        let admin = HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..HandleValue::new(100, "HS_ADMIN", record.encode())
        };
        assert_eq!(
            value_line(&admin),
            "100 HS_ADMIN 300:011111110011:0.NA/TEST"
        );
        assert_eq!(
            value_line(&HandleValue::new(7, "CUSTOM", vec![0xff, 0x00])),
            "7 CUSTOM /wA="
        );
        assert_eq!(
            value_line(&HandleValue::new(1, "URL", "https://a.example/")),
            "1 URL https://a.example/"
        );
    }
}
