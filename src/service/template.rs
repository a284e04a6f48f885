//! Template handles: what a resolution of a handle that does not exist answers when
//! its prefix's HS_NAMESPACE defines a template (`HANDLE-NET-REFERENCE.md` §1.9, as
//! the reference server's `getTemplateValues`).
//!
//! Owns [`Service::derive`], [`Resolved`] (a resolution's answer and, for a derived
//! one, its [`TemplateOrigin`]) and [`resolve_or_derive`], the one resolution every
//! edge runs. For a missing `P/name`: the public HS_NAMESPACE of the prefix handle
//! `0.NA/P` (held here, or read from the replica set owning it) gives the delimiter;
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
//! the records they need.

use crate::names::{Handle, prefix_handle};
use crate::values::namespace::{Derivation, Names, Namespace, Outcome, Rule, Template, split};
use crate::values::{HandleValue, KnownType, ValueSelection};

use super::{Caller, Error, Freshness, HandleRecord, Handler, Service, public_only};

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

/// Resolves `handle` at `handler`: its public values, or with `reader` every value
/// that administrator may read ([`Handler::resolve_all`]); a handle that does not
/// exist is derived from its prefix's template when there is one
/// ([`Handler::derive`]), else [`Error::HandleNotFound`].
pub async fn resolve_or_derive(
    handler: &dyn Handler,
    reader: Option<&Caller>,
    handle: &Handle,
    selection: &ValueSelection,
    freshness: Freshness,
) -> Result<Resolved, Error> {
    let found = match reader {
        None => handler.resolve(handle, selection, freshness).await,
        Some(caller) => {
            let resolved = handler.resolve_all(caller, handle, selection, freshness);
            resolved.await
        }
    };
    match found {
        Ok(record) => Ok(Resolved {
            record,
            template: None,
        }),
        Err(Error::HandleNotFound) => handler
            .derive(handle, selection)
            .await?
            .ok_or(Error::HandleNotFound),
        Err(error) => Err(error),
    }
}

impl Service {
    /// The values a template derives for `handle`, which this service does not hold
    /// (see the module docs); `None` when no template applies or it says not found.
    pub(super) async fn derive(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<Option<Resolved>, Error> {
        let prefix = handle.prefix();
        if handle.is_prefix_handle() || prefix == "0" || prefix.starts_with("0.") {
            return Ok(None);
        }
        let Ok(prefix_handle) = prefix_handle(prefix) else {
            return Ok(None);
        };
        let Some(prefix_namespace) = self.namespace_of(&prefix_handle).await? else {
            return Ok(None);
        };
        let Some(delimiter) = prefix_namespace.delimiter() else {
            return Ok(None);
        };
        let Some((base, extension)) = split(handle.as_str(), prefix.len(), delimiter) else {
            return Ok(None);
        };
        let base_handle = Handle::parse(base).ok();
        let base_values = match &base_handle {
            Some(base_handle) => public(self.values_of(base_handle).await?.unwrap_or_default()),
            None => Vec::new(),
        };
        let own = match &base_handle {
            Some(base_handle) => namespace_in(base_handle, &base_values)?
                .filter(|namespace| !namespace.templates().is_empty())
                .map(|namespace| (base_handle.clone(), namespace)),
            None => None,
        };
        let (origin, namespace) = own.unwrap_or((prefix_handle, prefix_namespace));
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

    /// The namespace in the public values of `handle`, if it has one.
    async fn namespace_of(&self, handle: &Handle) -> Result<Option<Namespace>, Error> {
        let values = public(self.values_of(handle).await?.unwrap_or_default());
        namespace_in(handle, &values)
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
    async fn cited(&self, handle: &Handle, index: u32) -> Result<Option<Namespace>, Error> {
        let values = public(self.values_of(handle).await?.unwrap_or_default());
        let Some(value) = values.iter().find(|value| value.index.0 == index) else {
            return Ok(None);
        };
        parsed(handle, &value.data).map(Some)
    }
}

/// The publicly readable values of `values`.
fn public(mut values: Vec<HandleValue>) -> Vec<HandleValue> {
    values.retain(HandleValue::is_public);
    values
}

/// The first HS_NAMESPACE of `values` (of `handle`), parsed.
fn namespace_in(handle: &Handle, values: &[HandleValue]) -> Result<Option<Namespace>, Error> {
    let Some(value) = values
        .iter()
        .find(|value| value.known_type() == Some(KnownType::HsNamespace))
    else {
        return Ok(None);
    };
    parsed(handle, &value.data).map(Some)
}

/// The namespace (or cited template) `data` held by `handle`, parsed; refused as
/// [`Error::Template`] naming `handle`.
fn parsed(handle: &Handle, data: &[u8]) -> Result<Namespace, Error> {
    Namespace::parse(data).map_err(|error| Error::Template {
        handle: handle.as_str().to_owned(),
        reason: error.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::PREFIX_AUTHORITY;

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
        let namespace = namespace_in(&holder, &values)
            .expect("parses")
            .expect("found");
        assert_eq!(namespace.delimiter(), Some("@"));
        assert!(
            namespace_in(&holder, &values[..1])
                .expect("parses")
                .is_none()
        );
        let error = namespace_in(&holder, &values[2..]).expect_err("refused");
        let message = error.to_string();
        assert!(message.contains("0.NA/10.5555"), "{message}");
        assert!(message.contains("not well-formed XML"), "{message}");
    }
}
