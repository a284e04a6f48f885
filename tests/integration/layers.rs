//! The layer order is checked, not only written down: this test reads the layer
//! table of README.md's "Layout" section and every `crate::…` path in `src/` (and
//! every `hdl::…` path in `src/main.rs`, the binary, whose row is `main`), and fails naming
//! the file, the line and the import when a module imports one its row does not
//! allow, when a row allows a module of its own or a later layer, and when a module
//! of `src/` has no row. Rows of modules that do not exist yet are ignored.
//!
//! Test code is exempt: `#[cfg(test)]` modules, and the files that only tests
//! compile (`tests.rs`, `*_tests.rs`, `proptests.rs`, `testing.rs`, and any file a
//! `#[cfg(test)] mod x;` declares). It reads files only: no process is started.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a grouped `crate::{…}` import is recorded as: the checker reads one module
/// per path, so such an import is reported for splitting.
const GROUPED: &str = "{…}";

/// One row of the layer table.
#[derive(Debug)]
struct Row {
    layer: u32,
    may_import: BTreeSet<String>,
}

/// One import found in a source file.
#[derive(Debug)]
struct Import {
    file: String,
    line: usize,
    text: String,
    module: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The rows of the table in README.md's "Layout" section, by module.
fn layer_table() -> BTreeMap<String, Row> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let layout = readme
        .split("\n## Layout")
        .nth(1)
        .expect("README.md has a \"## Layout\" section");
    let layout = layout.split("\n## ").next().unwrap_or(layout);
    let mut rows = BTreeMap::new();
    for line in layout.lines().filter(|line| line.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | layer | module | may import | what it is |
        let Some(Ok(layer)) = cells.get(1).map(|cell| cell.parse::<u32>()) else {
            continue; // the header and the separator
        };
        let module = backticked(cells[2]).next().expect("a `module` in the row");
        let may_import = backticked(cells[3]).map(str::to_owned).collect();
        let row = Row { layer, may_import };
        assert!(
            rows.insert(module.to_owned(), row).is_none(),
            "README.md's layer table has two rows for `{module}`"
        );
    }
    assert!(
        !rows.is_empty(),
        "README.md's Layout section has no layer table"
    );
    rows
}

/// The words between backticks in `cell`.
fn backticked(cell: &str) -> impl Iterator<Item = &str> {
    cell.split('`').skip(1).step_by(2)
}

/// The top-level modules of the crate, by name, with their files.
fn modules() -> BTreeMap<String, Vec<PathBuf>> {
    let src = root().join("src");
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("src/") {
        let path = entry.expect("an entry of src/").path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        match name {
            "lib" => {}
            _ if path.is_dir() => modules
                .entry(name.into())
                .or_default()
                .extend(rust_files(&path)),
            _ if path.extension().is_some_and(|e| e == "rs") => {
                modules.entry(name.into()).or_default().push(path.clone());
            }
            _ => {}
        }
    }
    modules
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a module directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// Whether only tests compile `path`, by its name.
fn test_only_by_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    matches!(name, "tests.rs" | "proptests.rs" | "testing.rs") || name.ends_with("_tests.rs")
}

/// The files that `#[cfg(test)] mod x;` declarations in `path` bring in.
fn test_only_children(path: &Path, text: &str) -> Vec<PathBuf> {
    let dir = match path.file_name().and_then(|s| s.to_str()) {
        Some("mod.rs" | "lib.rs" | "main.rs") => path.parent().map(Path::to_path_buf),
        _ => path
            .parent()
            .map(|parent| parent.join(path.file_stem().unwrap_or_default())),
    };
    let Some(dir) = dir else { return Vec::new() };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut children = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        if *line != "#[cfg(test)]" {
            continue;
        }
        let declaration = lines[at + 1..]
            .iter()
            .find(|line| !line.starts_with("#["))
            .copied()
            .unwrap_or_default();
        let declaration = declaration.strip_prefix("pub ").unwrap_or(declaration);
        if let Some(name) = declaration
            .strip_prefix("mod ")
            .and_then(|d| d.strip_suffix(';'))
        {
            children.push(dir.join(format!("{name}.rs")));
            children.push(dir.join(name).join("mod.rs"));
        }
    }
    children
}

/// Every import of another crate module in `text` outside `#[cfg(test)]` modules:
/// `crate::x` paths, and `hdl::x` paths in the binary's files.
fn imports(file: &str, text: &str, binary: bool) -> Vec<Import> {
    let prefix = if binary { "hdl::" } else { "crate::" };
    let mut found = Vec::new();
    let mut skip_until: Option<String> = None;
    let mut cfg_test = false;
    for (number, line) in text.lines().enumerate() {
        if let Some(end) = &skip_until {
            if line == end {
                skip_until = None;
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            cfg_test = true;
            continue;
        }
        if cfg_test && !trimmed.starts_with("#[") {
            cfg_test = false;
            let declaration = trimmed.strip_prefix("pub ").unwrap_or(trimmed);
            if declaration.starts_with("mod ") && trimmed.ends_with('{') {
                // rustfmt closes a module at the indentation it opened it.
                let indent = &line[..line.len() - trimmed.len()];
                skip_until = Some(format!("{indent}}}"));
                continue;
            }
        }
        let code = line.split(" //").next().unwrap_or(line);
        for (at, _) in code.match_indices(prefix) {
            let preceded = code[..at].chars().next_back();
            if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `mycrate::` or `super::crate::`
            }
            let rest = &code[at + prefix.len()..];
            let module: String = if rest.starts_with('{') {
                GROUPED.to_owned()
            } else {
                rest.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect()
            };
            if !module.is_empty() {
                found.push(Import {
                    file: file.to_owned(),
                    line: number + 1,
                    text: trimmed.to_owned(),
                    module,
                });
            }
        }
    }
    found
}

#[test]
fn every_module_imports_only_what_its_layer_allows() {
    let table = layer_table();
    let modules = modules();
    let mut problems = String::new();

    for module in modules.keys() {
        if !table.contains_key(module) {
            let _ = writeln!(
                problems,
                "module `{module}` of src/ has no row in README.md's layer table: \
                 add `| <layer> | `{module}` | <may import> | <what it is> |`"
            );
        }
    }
    for (module, row) in table.iter().filter(|(m, _)| modules.contains_key(*m)) {
        for allowed in &row.may_import {
            match table.get(allowed) {
                Some(other) if other.layer >= row.layer => {
                    let _ = writeln!(
                        problems,
                        "README.md: `{module}` (layer {}) may import `{allowed}`, which is \
                         of layer {}, not an earlier one",
                        row.layer, other.layer
                    );
                }
                Some(_) => {}
                None => {
                    let _ = writeln!(
                        problems,
                        "README.md: `{module}` may import `{allowed}`, which has no row"
                    );
                }
            }
        }
    }

    for (module, files) in &modules {
        let Some(row) = table.get(module) else {
            continue;
        };
        let texts: Vec<(PathBuf, String)> = files
            .iter()
            .map(|path| {
                (
                    path.clone(),
                    std::fs::read_to_string(path).expect("a source file"),
                )
            })
            .collect();
        let test_only: BTreeSet<PathBuf> = texts
            .iter()
            .flat_map(|(path, text)| test_only_children(path, text))
            .collect();
        for (path, text) in &texts {
            if test_only_by_name(path) || test_only.contains(path) {
                continue;
            }
            let relative = path.strip_prefix(root()).unwrap_or(path);
            let file = relative.to_string_lossy().into_owned();
            let binary = module == "main";
            for import in imports(&file, text, binary) {
                if import.module == *module || row.may_import.contains(&import.module) {
                    continue;
                }
                if import.module == GROUPED {
                    let _ = writeln!(
                        problems,
                        "{}:{}: a grouped import ({}): write one `use` per crate module so \
                         the layers can be checked",
                        import.file, import.line, import.text
                    );
                    continue;
                }
                let _ = writeln!(
                    problems,
                    "{}:{}: `{module}` imports `{}` ({}), which its row in README.md's layer table \
                     does not allow (may import: {})",
                    import.file,
                    import.line,
                    import.module,
                    import.text,
                    row.may_import
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                );
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the layer order is broken:\n{problems}"
    );
}

#[test]
fn the_checker_sees_imports_and_skips_test_code() {
    let text = "use crate::names::Handle;\n\
                // crate::storage in a comment\n\
                fn f() { crate::clock::unix_now(); } // crate::http\n\
                #[cfg(test)]\n\
                mod tests {\n    use crate::storage::Store;\n}\n\
                use crate::{values};\n";
    let found: Vec<String> = imports("x.rs", text, false)
        .into_iter()
        .map(|import| format!("{}:{}", import.line, import.module))
        .collect();
    assert_eq!(found, ["1:names", "3:clock", "8:{…}"]);
    let binary: Vec<String> = imports("main.rs", "hdl::cli::run()\n", true)
        .into_iter()
        .map(|import| import.module)
        .collect();
    assert_eq!(binary, ["cli"]);
}
