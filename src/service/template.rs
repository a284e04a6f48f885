//! Template handles: what a resolution of a handle that does not exist answers when
//! its prefix's HS_NAMESPACE defines a template (`HANDLE-NET-REFERENCE.md` §1.9, as
//! the reference server's `getTemplateValues`).
//!
//! Owns [`Service::derive`] and [`Resolved`] (a resolution's answer and, for a derived
//! one, its [`TemplateOrigin`]); module `missing` asks it first for a handle that does
//! not exist, with the prefix handle's values it read. For a missing `P/name`: the
//! public HS_NAMESPACE of the prefix handle `0.NA/P` gives the delimiter;
//! the handle splits at its first delimiter after the prefix into base and
//! extension; the base handle's public values (none if it does not exist, or for
//! delimiter `/`, whose base is the prefix itself) feed the template of the base's
//! own HS_NAMESPACE when it has one, else the prefix's. `<template ref>` values are
//! fetched here, at most [`MAX_CITED_TEMPLATES`] deep. The answer holds the derived
//! values the selection asks for; they are public (the template sees only public
//! values of the base, so it cannot publish a private one). `<notfound/>` leaves the
//! handle missing. An HS_NAMESPACE or template that is malformed, or a derivation
//! past its bounds, is [`Error::Template`] naming the handle holding it.
//!
//! Parsing and evaluation are [`crate::values::namespace`]'s; this module only reads
//! the records they need, and keeps what it parsed in the service's
//! [`NamespaceCache`] (module `namespaces`), by the XML's octets.

use std::sync::Arc;

use crate::names::Handle;
use crate::values::namespace::{Derivation, Names, Namespace, Outcome, Rule, Template, split};
use crate::values::{HandleValue, KnownType, ValueSelection};

use super::namespaces::NamespaceCache;
use super::{Error, HandleRecord, Service, public_only};

/// How many `<template ref>` values one derivation follows, one inside another.
pub const MAX_CITED_TEMPLATES: usize = 4;

/// Where a template-derived answer came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateOrigin {
    /// The handle whose HS_NAMESPACE holds the template (`0.NA/<prefix>` or the base).
    pub namespace: Handle,
    /// The base handle, as the handle asked for spells it.
    pub base: String,
}

/// A resolution's answer: the values, and where they came from when a template
/// derived them.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The handle's values.
    pub record: HandleRecord,
    /// The template that derived them; `None` for stored values.
    pub template: Option<TemplateOrigin>,
}

impl Service {
    /// The values a template derives for `handle`, which this service does not hold
    /// (see the module docs), given the values of its prefix handle `prefix_handle`
    /// (`None`: it does not exist); `None` when no template applies or it says not
    /// found.
    pub(super) async fn derive(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        prefix_handle: &Handle,
        prefix_values: Option<&[HandleValue]>,
    ) -> Result<Option<Resolved>, Error> {
        let prefix_values = prefix_values.unwrap_or_default();
        let Some(prefix_namespace) = namespace_in(&self.namespaces, prefix_handle, prefix_values)?
        else {
            return Ok(None);
        };
        let Some(delimiter) = prefix_namespace.delimiter() else {
            return Ok(None);
        };
        let prefix = handle.prefix();
        let Some((base, extension)) = split(handle.as_str(), prefix.len(), delimiter) else {
            return Ok(None);
        };
        let base_handle = Handle::parse(base).ok();
        let base_values = match &base_handle {
            Some(base_handle) => public(self.values_of(base_handle).await?.unwrap_or_default()),
            None => Vec::new(),
        };
        let own = match &base_handle {
            Some(base_handle) => namespace_in(&self.namespaces, base_handle, &base_values)?
                .filter(|namespace| !namespace.templates().is_empty())
                .map(|namespace| (base_handle.clone(), namespace)),
            None => None,
        };
        let (origin, namespace) = own.unwrap_or_else(|| (prefix_handle.clone(), prefix_namespace));
        let templates = self.rules_of(&origin, &namespace).await?;
        let names = Names {
            handle: handle.as_str(),
            base,
            extension,
        };
        let mut derivation = Derivation::new(names, &base_values);
        for rules in &templates {
            let outcome = derivation.apply(rules).map_err(|error| Error::Template {
                handle: origin.as_str().to_owned(),
                reason: error.to_string(),
            })?;
            if outcome == Outcome::NotFound {
                return Ok(None);
            }
        }
        let mut values = derivation.into_values();
        values.retain(|value| selection.matches(value));
        let record = public_only(HandleRecord {
            display: handle.as_str().to_owned(),
            values,
        })?;
        Ok(Some(Resolved {
            record,
            template: Some(TemplateOrigin {
                namespace: origin,
                base: base.to_owned(),
            }),
        }))
    }

    /// The rules of every template of `namespace` (held by `holder`), cited ones
    /// fetched, in order.
    async fn rules_of(
        &self,
        holder: &Handle,
        namespace: &Namespace,
    ) -> Result<Vec<Vec<Rule>>, Error> {
        let mut rules = Vec::new();
        let mut pending: Vec<(usize, Handle, Template)> = namespace
            .templates()
            .iter()
            .rev()
            .map(|template| (0, holder.clone(), template.clone()))
            .collect();
        while let Some((depth, holder, template)) = pending.pop() {
            match template {
                Template::Rules { rules: written, .. } => rules.push(written),
                Template::Cited { index, handle, .. } => {
                    let refused = |reason: String| Error::Template {
                        handle: holder.as_str().to_owned(),
                        reason,
                    };
                    if depth >= MAX_CITED_TEMPLATES {
                        let reason = format!(
                            "templates cite templates more than {MAX_CITED_TEMPLATES} deep"
                        );
                        return Err(refused(reason));
                    }
                    let cited = Handle::parse(&handle).map_err(|error| {
                        refused(format!("<template ref> names {handle:?}: {error}"))
                    })?;
                    let namespace = self.cited(&cited, index).await?.ok_or_else(|| {
                        refused(format!("<template ref> names {index}:{handle}, which holds no public value there"))
                    })?;
                    pending.extend(
                        namespace
                            .templates()
                            .iter()
                            .rev()
                            .map(|template| (depth + 1, cited.clone(), template.clone())),
                    );
                }
            }
        }
        Ok(rules)
    }

    /// The template XML at public value `index` of `handle`, parsed.
    async fn cited(&self, handle: &Handle, index: u32) -> Result<Option<Arc<Namespace>>, Error> {
        let values = public(self.values_of(handle).await?.unwrap_or_default());
        let Some(value) = values.iter().find(|value| value.index.0 == index) else {
            return Ok(None);
        };
        parsed(&self.namespaces, handle, &value.data).map(Some)
    }
}

/// The first public HS_NAMESPACE of `values` (of `handle`), parsed (or kept from an
/// earlier parse in `namespaces`).
fn namespace_in(
    namespaces: &NamespaceCache,
    handle: &Handle,
    values: &[HandleValue],
) -> Result<Option<Arc<Namespace>>, Error> {
    let Some(value) = values
        .iter()
        .find(|value| value.is_public() && value.known_type() == Some(KnownType::HsNamespace))
    else {
        return Ok(None);
    };
    parsed(namespaces, handle, &value.data).map(Some)
}

/// The namespace (or cited template) `data` held by `handle`, parsed (or kept from an
/// earlier parse in `namespaces`); refused as [`Error::Template`] naming `handle`.
fn parsed(
    namespaces: &NamespaceCache,
    handle: &Handle,
    data: &[u8],
) -> Result<Arc<Namespace>, Error> {
    namespaces.parsed(data).map_err(|error| Error::Template {
        handle: handle.as_str().to_owned(),
        reason: error.to_string(),
    })
}

/// The publicly readable values of `values`.
fn public(mut values: Vec<HandleValue>) -> Vec<HandleValue> {
    values.retain(HandleValue::is_public);
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::PREFIX_AUTHORITY;
    use crate::values::Permissions;

    #[test]
    fn the_first_namespace_value_is_read_and_a_bad_one_named() {
        let holder = Handle::parse(&format!("{PREFIX_AUTHORITY}/10.5555")).expect("handle");
        let values = [
            HandleValue::new(1, "URL", "https://e.org"),
            HandleValue::new(
                2,
                "HS_NAMESPACE",
                r#"<namespace><template delimiter="@"/></namespace>"#,
            ),
            HandleValue::new(3, "HS_NAMESPACE", "<broken"),
        ];
        let namespaces = NamespaceCache::default();
        let namespace = namespace_in(&namespaces, &holder, &values)
            .expect("parses")
            .expect("found");
        assert_eq!(namespace.delimiter(), Some("@"));
        assert!(
            namespace_in(&namespaces, &holder, &values[..1])
                .expect("parses")
                .is_none()
        );
        let error = namespace_in(&namespaces, &holder, &values[2..]).expect_err("refused");
        let message = error.to_string();
        assert!(message.contains("0.NA/10.5555"), "{message}");
        assert!(message.contains("not well-formed XML"), "{message}");
        let private = HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..values[1].clone()
        };
        let none = namespace_in(&namespaces, &holder, &[private]).expect("parses");
        assert!(none.is_none(), "a namespace that is not public is not read");
    }
}
