//! `hdl parse REF [--json]`: shows how a handle reference is understood.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use crate::names::HandleRef;
use anyhow::Context;
use clap::Args;
use serde_json::{Map, Value, json};

/// Arguments of `hdl parse`.
#[derive(Debug, Args)]
pub struct ParseArgs {
    /// The reference, e.g. `10.1000/1`, `hdl:jis@cnri.test/日本` or
    /// `https://hdl.handle.net/10.1000/1`. Its bytes are taken as given: a reference
    /// that is not UTF-8 must name its charset with an `encoding@` modifier.
    reference: OsString,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Parses the reference and prints its parts.
pub fn run(args: &ParseArgs) -> anyhow::Result<()> {
    let bytes = args.reference.as_bytes();
    let parsed = HandleRef::parse(bytes).with_context(|| {
        format!(
            "invalid handle reference {:?}",
            String::from_utf8_lossy(bytes)
        )
    })?;
    let report = describe(&parsed);
    if args.json {
        println!("{}", Value::Object(report));
    } else {
        for (field, value) in &report {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            println!("{:<11} {text}", format!("{field}:"));
        }
    }
    Ok(())
}

/// The parts of a reference as an ordered JSON object.
fn describe(parsed: &HandleRef) -> Map<String, Value> {
    let handle = &parsed.handle;
    let mut report = Map::new();
    report.insert("handle".into(), json!(handle.as_str()));
    report.insert("prefix".into(), json!(handle.prefix()));
    report.insert("local_name".into(), json!(handle.local_name()));
    report.insert("key".into(), json!(handle.key()));
    report.insert("form".into(), json!(parsed.form.as_str()));
    if let Some(server) = &parsed.server {
        report.insert("server".into(), json!(server.to_string()));
    }
    if let Some(encoding) = &parsed.encoding {
        report.insert("encoding".into(), json!(encoding));
    }
    if let Some(type_id) = parsed.type_id {
        report.insert("type".into(), json!(type_id));
    }
    report
}
