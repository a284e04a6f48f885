//! The batch files of the reference server's GenericBatch (`hdl-genericbatch`), read
//! by `hdl import --format batch` so operators can move their handles over.
//!
//! A file is a sequence of blocks, each ended by a blank line (or the end of the
//! file):
//!
//! ```text
//! CREATE 0.NA/TEST.ts1
//! 100 HS_ADMIN 86400 1110 ADMIN 300:111111111111:0.NA/TEST.ts1
//! 300 HS_SECKEY 86400 1100 UTF8 my_password
//!
//! ADD TEST/ts1
//! 2 URL 86400 1110 UTF8 http://www.handle.net/
//!
//! MODIFY TEST/ts1
//! 2 URL 86400 1110 UTF8 http://www.handle.net/new
//!
//! REMOVE 2,3:TEST/ts1
//!
//! DELETE TEST/ts1
//! ```
//!
//! `CREATE`, `ADD` and `MODIFY` take value lines, `<index> <type> <ttl> <permissions>
//! <format> <data>`: the TTL in seconds, the permissions as four `0`/`1` (admin read,
//! admin write, public read, public write), the data as `UTF8 <text>` (the rest of the
//! line, spaces included), `ADMIN <index>:<12 permission bits>:<handle>`, `FILE <path>`
//! (the file's octets, e.g. a key; a relative path is taken from the batch file's
//! directory) or `LIST <index>:<handle>;<index>:<handle>…` (an HS_VLIST). `REMOVE`
//! names the indexes to remove, `DELETE` the handle (each one line). `AUTHENTICATE`
//! and `SESSIONSETUP` blocks are skipped: `hdl import` authenticates with its own
//! `--auth` options. Anything else (`HOME`, `UNHOME`, an unknown word, a malformed
//! value line) is an error naming its line. Keywords are read in any case.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::names::Handle;
use crate::values::{
    HandleValue, KnownType, Permissions, Ttl, ValueIndex, ValueList, ValueReference,
};

use super::value_arg::{admin_data, parse_index};

/// One operation of a batch file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Create a handle with these values.
    Create(Handle, Vec<HandleValue>),
    /// Add values to a handle.
    Add(Handle, Vec<HandleValue>),
    /// Replace values of a handle, by index.
    Modify(Handle, Vec<HandleValue>),
    /// Remove values of a handle by index.
    Remove(Handle, Vec<ValueIndex>),
    /// Delete a handle.
    Delete(Handle),
}

/// A line of a batch file that cannot be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct BatchError {
    /// Its number, from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads the operations of a batch file, each with the number of its first line.
pub struct BatchReader<R> {
    lines: std::io::Lines<R>,
    number: usize,
    /// Where `FILE` paths are taken from.
    base: PathBuf,
    /// Octets read so far (lines and their newlines).
    pub octets: u64,
}

impl<R: BufRead> BatchReader<R> {
    /// A reader of `source`, a batch file in the directory `base`.
    pub fn new(source: R, base: &Path) -> BatchReader<R> {
        BatchReader {
            lines: source.lines(),
            number: 0,
            base: base.to_owned(),
            octets: 0,
        }
    }

    fn next_line(&mut self) -> Result<Option<String>, BatchError> {
        match self.lines.next() {
            None => Ok(None),
            Some(Ok(line)) => {
                self.number += 1;
                self.octets += line.len() as u64 + 1;
                Ok(Some(line))
            }
            Some(Err(error)) => Err(BatchError {
                line: self.number + 1,
                message: format!("cannot read: {error}"),
            }),
        }
    }

    fn error(&self, line: usize, message: impl Into<String>) -> BatchError {
        BatchError {
            line,
            message: message.into(),
        }
    }

    /// The next operation and its line, or `None` at the end of the file.
    pub fn next_op(&mut self) -> Result<Option<(usize, BatchOp)>, BatchError> {
        loop {
            let Some(line) = self.next_line()? else {
                return Ok(None);
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let start = self.number;
            let (keyword, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let rest = rest.trim();
            let op = match keyword.to_ascii_uppercase().as_str() {
                "CREATE" => BatchOp::Create(self.handle(start, rest)?, self.values()?),
                "ADD" => BatchOp::Add(self.handle(start, rest)?, self.values()?),
                "MODIFY" => BatchOp::Modify(self.handle(start, rest)?, self.values()?),
                "DELETE" => BatchOp::Delete(self.handle(start, rest)?),
                "REMOVE" => self.remove(start, rest)?,
                "AUTHENTICATE" | "SESSIONSETUP" => {
                    self.skip_block()?;
                    continue;
                }
                other => {
                    return Err(self.error(
                        start,
                        format!("{other:?} is not an operation hdl import takes (CREATE, ADD, MODIFY, REMOVE, DELETE)"),
                    ));
                }
            };
            return Ok(Some((start, op)));
        }
    }

    fn handle(&self, line: usize, text: &str) -> Result<Handle, BatchError> {
        Handle::parse(text).map_err(|error| self.error(line, format!("handle {text:?}: {error}")))
    }

    /// `REMOVE <indexes>:<handle>`.
    fn remove(&self, line: usize, rest: &str) -> Result<BatchOp, BatchError> {
        let (indexes, handle) = rest.split_once(':').ok_or_else(|| {
            self.error(line, "REMOVE takes INDEXES:HANDLE, e.g. REMOVE 2,3:TEST/1")
        })?;
        let indexes = indexes
            .split(',')
            .map(|index| parse_index(index.trim()).map(ValueIndex))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|message| self.error(line, message))?;
        Ok(BatchOp::Remove(self.handle(line, handle.trim())?, indexes))
    }

    /// The value lines of a block, up to a blank line or the end.
    fn values(&mut self) -> Result<Vec<HandleValue>, BatchError> {
        let mut values = Vec::new();
        while let Some(line) = self.next_line()? {
            if line.trim().is_empty() {
                break;
            }
            let value = value_line(line.trim(), &self.base);
            values.push(value.map_err(|message| self.error(self.number, message))?);
        }
        Ok(values)
    }

    fn skip_block(&mut self) -> Result<(), BatchError> {
        while let Some(line) = self.next_line()? {
            if line.trim().is_empty() {
                break;
            }
        }
        Ok(())
    }
}

/// Reads `<index> <type> <ttl> <permissions> <format> <data>`.
fn value_line(line: &str, base: &Path) -> Result<HandleValue, String> {
    let mut fields = line.splitn(6, char::is_whitespace);
    let mut next = |what: &str| {
        fields
            .next()
            .filter(|field| !field.is_empty())
            .ok_or_else(|| {
                format!("a value line is INDEX TYPE TTL PERMISSIONS FORMAT DATA; {what} is missing")
            })
    };
    let index = parse_index(next("the index")?)?;
    let value_type = next("the type")?.to_owned();
    let ttl = next("the TTL")?;
    let ttl = ttl
        .parse::<u32>()
        .map_err(|_| format!("TTL {ttl:?} is not a number of seconds"))?;
    let permissions = permissions(next("the permissions")?)?;
    let format = next("the data format")?.to_ascii_uppercase();
    let data = fields.next().unwrap_or("");
    let data = match format.as_str() {
        "UTF8" => data.as_bytes().to_vec(),
        "ADMIN" => admin_data(data)?,
        "FILE" => {
            let path = base.join(data);
            std::fs::read(&path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?
        }
        "LIST" => vlist(data)?,
        other => {
            return Err(format!(
                "data format {other:?} is not UTF8, ADMIN, FILE or LIST"
            ));
        }
    };
    if KnownType::from_name(&value_type) == Some(KnownType::HsAdmin) && format != "ADMIN" {
        return Err("an HS_ADMIN value's data is ADMIN INDEX:PERMISSIONS:HANDLE".into());
    }
    Ok(HandleValue {
        ttl: Ttl::Relative(ttl),
        permissions,
        ..HandleValue::new(index, value_type, data)
    })
}

/// Four `0`/`1`: admin read, admin write, public read, public write.
fn permissions(text: &str) -> Result<Permissions, String> {
    Permissions::from_bit_string(text)
        .ok_or_else(|| format!("permissions {text:?} are not four 0 or 1 (e.g. 1110)"))
}

/// HS_VLIST data from `<index>:<handle>;<index>:<handle>…`.
fn vlist(text: &str) -> Result<Vec<u8>, String> {
    let members = text
        .split(';')
        .map(str::trim)
        .filter(|member| !member.is_empty())
        .map(|member| {
            let (index, handle) = member
                .split_once(':')
                .ok_or_else(|| format!("list member {member:?} is not INDEX:HANDLE"))?;
            let index = index
                .parse::<u32>()
                .map_err(|_| format!("list member {member:?}: {index:?} is not an index"))?;
            Ok(ValueReference {
                handle: handle.to_owned(),
                index: ValueIndex(index),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(ValueList(members).encode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{AdminPermissions, AdminRecord};

    fn read_all(text: &str) -> Result<Vec<(usize, BatchOp)>, BatchError> {
        let mut reader = BatchReader::new(text.as_bytes(), Path::new("."));
        let mut ops = Vec::new();
        while let Some(op) = reader.next_op()? {
            ops.push(op);
        }
        Ok(ops)
    }

    fn handle(text: &str) -> Handle {
        Handle::parse(text).unwrap()
    }

    #[test]
    fn every_block_of_the_reference_servers_example_is_read() {
        let text = "\
AUTHENTICATE SECKEY:300:0.NA/TEST
my_password

CREATE TEST/ts1
100 HS_ADMIN 86400 1110 ADMIN 300:111111111111:0.NA/TEST
1 URL 86400 1110 UTF8 http://www.handle.net/a b
200 HS_VLIST 3600 1110 LIST 300:0.NA/TEST;301:0.NA/TEST;
300 HS_SECKEY 86400 1100 UTF8 my_password

add TEST/ts1
2 EMAIL 60 1111 UTF8 hdl@example.org

MODIFY TEST/ts1
2 EMAIL 60 1110 UTF8 other@example.org

REMOVE 2,1:TEST/ts1
DELETE TEST/ts1
";
        let ops = read_all(text).unwrap();
        let lines: Vec<usize> = ops.iter().map(|(line, _)| *line).collect();
        assert_eq!(lines, [4, 10, 13, 16, 17]);
        let BatchOp::Create(created, values) = &ops[0].1 else {
            panic!("{:?}", ops[0]);
        };
        assert_eq!(*created, handle("TEST/ts1"));
        let admin = AdminRecord::decode(&values[0].data).unwrap();
        assert_eq!(admin.admin_handle, "0.NA/TEST");
        assert_eq!(admin.permissions, AdminPermissions::ALL);
        assert_eq!(values[1].data, b"http://www.handle.net/a b");
        assert_eq!(values[1].ttl, Ttl::Relative(86400));
        let list = ValueList::decode(&values[2].data).unwrap();
        assert_eq!(list.0.len(), 2);
        assert_eq!(list.0[1].index, ValueIndex(301));
        assert_eq!(values[3].permissions, Permissions::ADMIN_ONLY);
        let BatchOp::Add(_, added) = &ops[1].1 else {
            panic!("{:?}", ops[1]);
        };
        assert!(added[0].permissions.contains(Permissions::PUBLIC_WRITE));
        assert_eq!(
            ops[3].1,
            BatchOp::Remove(handle("TEST/ts1"), vec![ValueIndex(2), ValueIndex(1)])
        );
        assert_eq!(ops[4].1, BatchOp::Delete(handle("TEST/ts1")));
    }

    #[test]
    fn a_value_may_come_from_a_file_beside_the_batch() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key.bin"), [0, 1, 2]).unwrap();
        let text = "CREATE TEST/k\n300 HS_PUBKEY 86400 1110 FILE key.bin\n";
        let mut reader = BatchReader::new(text.as_bytes(), dir.path());
        let Some((_, BatchOp::Create(_, values))) = reader.next_op().unwrap() else {
            panic!("no create");
        };
        assert_eq!(values[0].data, [0, 1, 2]);
    }

    #[test]
    fn a_malformed_line_is_named() {
        let cases = [
            (
                "CREATE TEST/a\n1 URL 86400 1110\n",
                2,
                "data format is missing",
            ),
            ("CREATE TEST/a\n1 URL day 1110 UTF8 x\n", 2, "TTL"),
            ("CREATE TEST/a\n1 URL 1 11x0 UTF8 x\n", 2, "permissions"),
            ("CREATE TEST/a\n1 URL 1 1110 TEXT x\n", 2, "data format"),
            ("CREATE TEST/a\n0 URL 1 1110 UTF8 x\n", 2, "from 1"),
            ("\n\nHOME 127.0.0.1:2641:tcp\n", 3, "HOME"),
            ("REMOVE TEST/a\n", 1, "INDEXES:HANDLE"),
            ("CREATE noslash\n", 1, "handle"),
            ("CREATE TEST/a\n100 HS_ADMIN 1 1110 UTF8 x\n", 2, "HS_ADMIN"),
            (
                "CREATE TEST/a\n200 HS_VLIST 1 1110 LIST x\n",
                2,
                "INDEX:HANDLE",
            ),
        ];
        for (text, line, expected) in cases {
            let error = read_all(text).unwrap_err();
            assert_eq!(error.line, line, "{text}: {error}");
            assert!(error.message.contains(expected), "{text}: {error}");
        }
    }
}
