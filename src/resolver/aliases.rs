//! Following HS_ALIAS values (digest §6.3): a handle whose values hold an HS_ALIAS is
//! an alias of the handle it names, which is resolved in its place (globally: it may
//! live at another service), at most [`MAX_ALIAS_DEPTH`] aliases deep; a handle met
//! twice is a loop, refused with the chain of handles.
//!
//! Owns [`Aliases`], [`Resolved`] and [`Resolver::resolve_following`]. When a type or
//! index filter is given, HS_ALIAS is asked for as well, so that an alias is seen
//! whatever the filter; a handle without one answers exactly what the filter picks.

use crate::names::Handle;
use crate::values::{HandleTarget, HandleValue, KnownType, ValueSelection};

use super::{Recency, ResolveError, Resolver, Step};

/// How many aliases one resolution follows, one after the other.
pub const MAX_ALIAS_DEPTH: usize = 8;

/// Whether a resolution follows HS_ALIAS values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aliases {
    /// Resolve the handle an alias names instead.
    Follow,
    /// Answer the alias's own values (`--no-follow`).
    Show,
}

/// The outcome of a global resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The handles resolved, the one asked for first and the one answering last.
    pub chain: Vec<Handle>,
    /// The values of the last one.
    pub values: Vec<HandleValue>,
}

impl Resolver {
    /// The public values of `handle` that `selection` picks, found through the GHR;
    /// with [`Aliases::Follow`], those of the handle its aliases lead to.
    pub async fn resolve_following(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        aliases: Aliases,
    ) -> Result<Resolved, ResolveError> {
        let asked = match aliases {
            Aliases::Follow => with_alias(selection),
            Aliases::Show => selection.clone(),
        };
        let mut chain = vec![handle.clone()];
        for _ in 0..=MAX_ALIAS_DEPTH {
            let current = chain.last().unwrap_or(handle).clone();
            let resolved = self.resolve_at_service(&current, &asked, Recency::Any);
            let values = resolved.await?.values;
            let target = match aliases {
                Aliases::Follow => alias_target(&values),
                Aliases::Show => None,
            };
            let Some(target) = target else {
                return Ok(Resolved { chain, values });
            };
            self.trace(Step::Alias {
                from: current.to_string(),
                to: target.to_string(),
            });
            let looped = chain.contains(&target);
            chain.push(target);
            if looped {
                return Err(ResolveError::AliasLoop {
                    chain: names(&chain),
                });
            }
        }
        Err(ResolveError::AliasTooDeep {
            chain: names(&chain),
        })
    }
}

/// `selection`, also picking HS_ALIAS values when it filters at all.
fn with_alias(selection: &ValueSelection) -> ValueSelection {
    let mut asked = selection.clone();
    let filters = !asked.indexes.is_empty() || !asked.types.is_empty();
    let alias = KnownType::HsAlias.name();
    if filters && !asked.types.iter().any(|t| t.eq_ignore_ascii_case(alias)) {
        asked.types.push(alias.to_owned());
    }
    asked
}

/// The handle the first decodable HS_ALIAS among `values` names.
fn alias_target(values: &[HandleValue]) -> Option<Handle> {
    values
        .iter()
        .filter(|value| value.known_type() == Some(KnownType::HsAlias))
        .find_map(|value| HandleTarget::decode(&value.data).ok())
        .and_then(|target| Handle::parse(target.as_str()).ok())
}

fn names(chain: &[Handle]) -> Vec<String> {
    chain.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_also_asks_for_aliases() {
        let all = ValueSelection::default();
        assert_eq!(with_alias(&all), all, "no filter picks aliases already");
        let urls = ValueSelection {
            indexes: Vec::new(),
            types: vec!["URL".to_owned()],
        };
        assert_eq!(with_alias(&urls).types, ["URL", "HS_ALIAS"]);
        let indexed = ValueSelection {
            indexes: vec![crate::values::ValueIndex(1)],
            types: vec!["hs_alias".to_owned()],
        };
        assert_eq!(with_alias(&indexed), indexed);
    }

    #[test]
    fn the_first_valid_alias_is_followed() {
        let values = [
            HandleValue::new(1, "URL", "https://example.org/"),
            HandleValue::new(2, "HS_ALIAS", "no slash"),
            HandleValue::new(3, "HS_ALIAS", "10.5555/target"),
        ];
        assert_eq!(
            alias_target(&values),
            Some(Handle::parse("10.5555/target").unwrap())
        );
        assert_eq!(alias_target(&values[..2]), None);
    }
}
