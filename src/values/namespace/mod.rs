//! HS_NAMESPACE values and the template handles they define, as Handle.Net v9 has
//! them (`HANDLE-NET-REFERENCE.md` §1.9, digest §6.7): a prefix handle
//! `0.NA/<prefix>` (or a base handle) holding
//! `<namespace><template delimiter="@">…rules…</template></namespace>` lets a handle
//! that does not exist, `base@extension`, resolve to values derived from the values
//! of `base`.
//!
//! Owns the parser of the XML into a [`Namespace`] (module `parse`) and the evaluator
//! of its rules over a base handle's values (module `derive`). Pure and sans-IO: a
//! `<template ref="index:handle"/>` is returned as a [`Template::Cited`] for the
//! caller to fetch and parse ([`Namespace::parse`] again); nothing here reads a store
//! or the network. Depends on [`super`] (values) only.
//!
//! The rules, inside a `<template>`:
//! - `<value [index=…] [type=…] [data=…]>[data]</value>`: a value; its data is the
//!   `data` attribute, else its text, else the XML it contains (a `10320/loc`, say).
//!   Outside `<foreach>` it needs a type and data; inside, it copies the current base
//!   value, changing what it names. An index already taken moves to the next free one.
//! - `<foreach>…</foreach>`: its rules once per (public) value of the base handle,
//!   with `${index}`, `${type}` and `${data}` of that value.
//! - `<if [value="extension"] [parameter=…] [test="equals|matches"] [expression=…]
//!   [negate="true"]>…</if>` and `<else>…</else>` (the last `<if>` before it, negated):
//!   `matches` is a whole-string, case-insensitive regular expression (the `regex`
//!   crate: linear time), whose groups are `${parameter[N]}` (and `${N}`, `$N` for the
//!   extension's); an `<if>` with neither test nor expression always holds.
//! - `<def parameter="p">…</def>`: `${p}` is the data of the first value its rules make.
//! - `<notfound/>`: the handle does not exist after all.
//!
//! `${handle}`, `${base}`, `${extension}` (and any parameter) are substituted in
//! `type`, `data` and text; `\` escapes the next character; an unknown name is empty.
//! Unknown elements inside a template are refused (the reference ignores them, which
//! hides a misspelt rule), as are an `<else>` with no `<if>` before it, a `<def>`
//! without `parameter`, a test other than the two, and an expression that does not
//! compile.
//!
//! Bounds: the XML is at most [`MAX_NAMESPACE_OCTETS`] octets and
//! [`MAX_XML_NODES`] nodes, rules nest at most [`MAX_RULE_DEPTH`] deep, it holds at
//! most [`MAX_EXPRESSIONS`] `matches` expressions, each compiling to at most
//! [`MAX_REGEX_OCTETS`] with a match cache of as much (so a parsed namespace holds at
//! most [`Namespace::expression_octets`] of them), one derivation makes at most
//! [`MAX_DERIVED_VALUES`] values of at most [`MAX_DERIVED_OCTETS`] octets of data in
//! all, and visits at most [`MAX_RULE_VISITS`] rules.

mod derive;
mod parse;

use regex::Regex;
use thiserror::Error;

pub use derive::{Derivation, Names, Outcome};

/// The most octets of namespace XML parsed.
pub const MAX_NAMESPACE_OCTETS: usize = 64 * 1024;
/// The most XML nodes (elements, text, attributes' owners) parsed.
pub const MAX_XML_NODES: u32 = 4096;
/// How deep rules may nest inside a template.
pub const MAX_RULE_DEPTH: usize = 16;
/// The most octets one `matches` expression compiles to, and the most its lazy DFA
/// caches for one thread matching it.
pub const MAX_REGEX_OCTETS: usize = 256 * 1024;
/// The most `matches` expressions one namespace (or cited template) holds.
pub const MAX_EXPRESSIONS: usize = 32;
/// The most values one derivation makes.
pub const MAX_DERIVED_VALUES: usize = 256;
/// The most octets of type and data, in all, one derivation makes.
pub const MAX_DERIVED_OCTETS: usize = 256 * 1024;
/// The most rules one derivation visits (`<foreach>` visits its rules once per value).
pub const MAX_RULE_VISITS: usize = 64 * 1024;

/// A parsed HS_NAMESPACE: its templates, in written order.
#[derive(Debug, Clone)]
pub struct Namespace {
    templates: Vec<Template>,
    /// Its `matches` expressions.
    expressions: usize,
}

/// One `<template>` of a namespace.
#[derive(Debug, Clone)]
pub enum Template {
    /// Rules written in place.
    Rules {
        /// The `delimiter` attribute, if any.
        delimiter: Option<String>,
        /// The rules.
        rules: Vec<Rule>,
    },
    /// `<template ref="index:handle"/>`: the template is the value at `index` of
    /// `handle`, itself a `<template>` or a namespace holding some.
    Cited {
        /// The `delimiter` attribute, if any.
        delimiter: Option<String>,
        /// The value's index.
        index: u32,
        /// The handle holding it.
        handle: String,
    },
}

impl Template {
    fn delimiter(&self) -> Option<&str> {
        match self {
            Template::Rules { delimiter, .. } | Template::Cited { delimiter, .. } => {
                delimiter.as_deref()
            }
        }
    }
}

impl Namespace {
    /// The templates, in written order.
    pub fn templates(&self) -> &[Template] {
        &self.templates
    }

    /// The most octets its compiled expressions hold: each its program and one
    /// thread's match cache, at their bounds.
    pub fn expression_octets(&self) -> usize {
        self.expressions * 2 * MAX_REGEX_OCTETS
    }

    /// The template delimiter: the first template's `delimiter` (as the reference
    /// reads it), when it has a non-empty one.
    pub fn delimiter(&self) -> Option<&str> {
        self.templates
            .first()
            .and_then(Template::delimiter)
            .filter(|delimiter| !delimiter.is_empty())
    }
}

/// One rule of a template.
#[derive(Debug, Clone)]
pub enum Rule {
    /// `<value>`.
    Value {
        /// The index asked for.
        index: Option<u32>,
        /// The type, with `${…}` to substitute.
        value_type: Option<String>,
        /// The data, with `${…}` to substitute.
        data: Option<String>,
    },
    /// `<if>` or `<else>`: `rules` when `condition` holds.
    When {
        /// The test.
        condition: Condition,
        /// The rules it guards.
        rules: Vec<Rule>,
    },
    /// `<foreach>`.
    ForEach(Vec<Rule>),
    /// `<def parameter=…>`.
    Define {
        /// The parameter defined.
        parameter: String,
        /// The rules whose first value's data it is.
        rules: Vec<Rule>,
    },
    /// `<notfound/>`.
    NotFound,
}

/// What an `<if>` (or its `<else>`) tests.
#[derive(Debug, Clone)]
pub struct Condition {
    /// The name whose value is tested (`extension` unless said).
    pub subject: String,
    /// The name the tested value (or its match) is bound to inside.
    pub parameter: String,
    /// The test.
    pub test: Test,
    /// Whether the outcome is negated (`negate="true"`, or an `<else>`).
    pub negate: bool,
}

/// An `<if>`'s test.
#[derive(Debug, Clone)]
pub enum Test {
    /// Neither test nor expression: always holds.
    Always,
    /// `test="equals"` (or no test): the value is the expression.
    Equals(String),
    /// `test="matches"`: the whole value matches, ignoring case.
    Matches(Regex),
}

/// Why an HS_NAMESPACE value was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NamespaceError {
    /// More octets than [`MAX_NAMESPACE_OCTETS`].
    #[error("the namespace is {octets} octets, more than the {limit} allowed")]
    TooLarge {
        /// Its size.
        octets: usize,
        /// The bound.
        limit: usize,
    },
    /// Not UTF-8.
    #[error("the namespace is not UTF-8")]
    NotUtf8,
    /// Not well-formed XML (or more nodes than [`MAX_XML_NODES`]).
    #[error("the namespace is not well-formed XML: {0}")]
    Xml(String),
    /// Rules nested deeper than [`MAX_RULE_DEPTH`].
    #[error("template rules nest more than {limit} deep")]
    TooDeep {
        /// The bound.
        limit: usize,
    },
    /// An element a template does not know.
    #[error("unknown template element <{0}>")]
    UnknownElement(String),
    /// A required attribute is missing.
    #[error("<{element}> needs a {attribute} attribute")]
    MissingAttribute {
        /// The element.
        element: &'static str,
        /// The attribute.
        attribute: &'static str,
    },
    /// An attribute whose value is not one it may take.
    #[error("<{element}> {attribute}={value:?} is not valid: {reason}")]
    BadAttribute {
        /// The element.
        element: &'static str,
        /// The attribute.
        attribute: &'static str,
        /// Its value.
        value: String,
        /// What it may be.
        reason: String,
    },
    /// An `<else>` with no `<if>` before it.
    #[error("<else> must follow an <if>")]
    ElseWithoutIf,
    /// More `matches` expressions than [`MAX_EXPRESSIONS`].
    #[error("the namespace holds {count} matches expressions, more than the {limit} allowed")]
    TooManyExpressions {
        /// How many it holds.
        count: usize,
        /// The bound.
        limit: usize,
    },
}

/// Why a derivation failed (a template that parsed but cannot be carried out within
/// its bounds).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeriveError {
    /// More values than [`MAX_DERIVED_VALUES`].
    #[error("the template makes more than {limit} values")]
    TooManyValues {
        /// The bound.
        limit: usize,
    },
    /// More octets than [`MAX_DERIVED_OCTETS`].
    #[error("the template makes more than {limit} octets of values")]
    TooLarge {
        /// The bound.
        limit: usize,
    },
    /// More rule visits than [`MAX_RULE_VISITS`].
    #[error("the template takes more than {limit} steps")]
    TooLong {
        /// The bound.
        limit: usize,
    },
    /// No free value index is left.
    #[error("the template runs out of value indexes")]
    NoIndex,
}

/// Where `handle` splits into base and extension under `delimiter`: at the first
/// `delimiter` at or after the end of its prefix (`prefix_len` octets), as the
/// reference splits; `/` thus makes the prefix itself the base. `None` when the
/// handle has no delimiter there.
pub fn split<'a>(
    handle: &'a str,
    prefix_len: usize,
    delimiter: &str,
) -> Option<(&'a str, &'a str)> {
    if delimiter.is_empty() {
        return None;
    }
    let tail = handle.get(prefix_len..)?;
    let at = prefix_len + tail.find(delimiter)?;
    Some((&handle[..at], &handle[at + delimiter.len()..]))
}

#[cfg(test)]
mod tests;
