//! Carrying out a template's rules over a base handle's values: a [`Derivation`]
//! gathers the values every template of a namespace makes, in order, until one says
//! `<notfound/>`.

use std::collections::HashMap;

use super::{
    Condition, DeriveError, MAX_DERIVED_OCTETS, MAX_DERIVED_VALUES, MAX_RULE_VISITS, Rule, Test,
};
use crate::values::{HandleValue, ValueIndex};

/// The names a template substitutes for `${handle}`, `${base}` and `${extension}`.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a> {
    /// The handle asked for.
    pub handle: &'a str,
    /// Its part before the delimiter.
    pub base: &'a str,
    /// Its part after the delimiter.
    pub extension: &'a str,
}

/// What applying rules came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The rules ran to their end.
    Done,
    /// A `<notfound/>` was reached: the handle does not exist.
    NotFound,
}

/// The values templates make for one handle, from the values of its base.
#[derive(Debug)]
pub struct Derivation<'a> {
    base_values: &'a [HandleValue],
    names: Bindings,
    made: Vec<HandleValue>,
    count: usize,
    octets: usize,
    visits: usize,
}

impl<'a> Derivation<'a> {
    /// A derivation for `names`, whose base holds `base_values`.
    pub fn new(names: Names<'_>, base_values: &'a [HandleValue]) -> Self {
        let names = Bindings::default()
            .with_text("handle", names.handle)
            .with_text("base", names.base)
            .with_text("extension", names.extension);
        Derivation {
            base_values,
            names,
            made: Vec::new(),
            count: 0,
            octets: 0,
            visits: 0,
        }
    }

    /// Applies one template's `rules`, adding the values they make.
    pub fn apply(&mut self, rules: &[Rule]) -> Result<Outcome, DeriveError> {
        let names = self.names.clone();
        let mut made = std::mem::take(&mut self.made);
        let outcome = self.run(rules, None, &names, &mut made);
        self.made = made;
        outcome
    }

    /// The values made, in the order they were made.
    pub fn into_values(self) -> Vec<HandleValue> {
        self.made
    }

    fn run(
        &mut self,
        rules: &[Rule],
        current: Option<&HandleValue>,
        bindings: &Bindings,
        out: &mut Vec<HandleValue>,
    ) -> Result<Outcome, DeriveError> {
        let mut bindings = bindings.clone();
        for rule in rules {
            self.visits += 1;
            if self.visits > MAX_RULE_VISITS {
                return Err(DeriveError::TooLong {
                    limit: MAX_RULE_VISITS,
                });
            }
            let outcome = match rule {
                Rule::Value {
                    index,
                    value_type,
                    data,
                } => {
                    let spec = (*index, value_type.as_deref(), data.as_deref());
                    self.value(spec, current, &bindings, out)?;
                    Outcome::Done
                }
                Rule::When { condition, rules } => match holds(condition, &bindings) {
                    Some(inner) => self.run(rules, current, &inner, out)?,
                    None => Outcome::Done,
                },
                // A `<foreach>` inside another does nothing, as in the reference.
                Rule::ForEach(_) if current.is_some() => Outcome::Done,
                Rule::ForEach(rules) => self.for_each(rules, &bindings, out)?,
                Rule::Define { parameter, rules } => {
                    let mut defined = Vec::new();
                    if self.run(rules, current, &bindings, &mut defined)? == Outcome::NotFound {
                        return Ok(Outcome::NotFound);
                    }
                    if let Some(first) = defined.first() {
                        let text = String::from_utf8_lossy(&first.data).into_owned();
                        bindings = bindings.with_text(parameter, &text);
                    }
                    Outcome::Done
                }
                Rule::NotFound => Outcome::NotFound,
            };
            if outcome == Outcome::NotFound {
                return Ok(Outcome::NotFound);
            }
        }
        Ok(Outcome::Done)
    }

    /// `<foreach>`: its rules once per base value.
    fn for_each(
        &mut self,
        rules: &[Rule],
        bindings: &Bindings,
        out: &mut Vec<HandleValue>,
    ) -> Result<Outcome, DeriveError> {
        let base_values = self.base_values;
        for value in base_values {
            let inner = bindings
                .clone()
                .with_text("index", &value.index.0.to_string())
                .with_text("type", &value.value_type)
                .with_text("data", &String::from_utf8_lossy(&value.data));
            if self.run(rules, Some(value), &inner, out)? == Outcome::NotFound {
                return Ok(Outcome::NotFound);
            }
        }
        Ok(Outcome::Done)
    }

    /// `<value>`: a new value (outside `<foreach>`, when it has a type and data) or
    /// the current base value changed as it says, at the first free index from the
    /// one asked for.
    fn value(
        &mut self,
        (index, value_type, data): (Option<u32>, Option<&str>, Option<&str>),
        current: Option<&HandleValue>,
        bindings: &Bindings,
        out: &mut Vec<HandleValue>,
    ) -> Result<(), DeriveError> {
        let mut value = match (current, value_type, data) {
            (Some(current), _, _) => current.clone(),
            (None, Some(_), Some(_)) => HandleValue::new(1, "", Vec::new()),
            (None, _, _) => return Ok(()),
        };
        if let Some(value_type) = value_type {
            value.value_type = bindings.substitute(value_type);
        }
        if let Some(data) = data {
            value.data = bindings.substitute(data).into_bytes();
        }
        value.index = free_index(out, index.map_or(value.index, ValueIndex))?;
        self.count += 1;
        self.octets += value.value_type.len() + value.data.len();
        if self.count > MAX_DERIVED_VALUES {
            return Err(DeriveError::TooManyValues {
                limit: MAX_DERIVED_VALUES,
            });
        }
        if self.octets > MAX_DERIVED_OCTETS {
            return Err(DeriveError::TooLarge {
                limit: MAX_DERIVED_OCTETS,
            });
        }
        out.push(value);
        Ok(())
    }
}

/// The first index from `wanted` (at least 1) that no value of `made` has.
fn free_index(made: &[HandleValue], wanted: ValueIndex) -> Result<ValueIndex, DeriveError> {
    let mut index = wanted.0.max(1);
    while made.iter().any(|value| value.index.0 == index) {
        index = index.checked_add(1).ok_or(DeriveError::NoIndex)?;
    }
    Ok(ValueIndex(index))
}

/// The bindings inside an `<if>` whose `condition` holds under `bindings`; `None`
/// when it does not.
fn holds(condition: &Condition, bindings: &Bindings) -> Option<Bindings> {
    let value = bindings.get(&condition.subject);
    let parameter = condition.parameter.as_str();
    match &condition.test {
        Test::Always => (!condition.negate).then(|| bindings.clone()),
        Test::Equals(expression) => (condition.negate != (value == *expression))
            .then(|| bindings.clone().with_text(parameter, &value)),
        Test::Matches(regex) => match (regex.captures(&value), condition.negate) {
            (Some(captures), false) => {
                let groups = captures
                    .iter()
                    .map(|group| group.map_or_else(String::new, |g| g.as_str().to_owned()))
                    .collect();
                Some(bindings.clone().with_groups(parameter, groups))
            }
            (None, true) => Some(bindings.clone().with_text(parameter, &value)),
            _ => None,
        },
    }
}

/// What names stand for: each a text and, when bound to a match, its groups (the
/// text being group 0).
#[derive(Debug, Clone, Default)]
struct Bindings {
    bound: HashMap<String, Vec<String>>,
}

impl Bindings {
    fn with_text(self, name: &str, text: &str) -> Self {
        self.with_groups(name, vec![text.to_owned()])
    }

    fn with_groups(mut self, name: &str, groups: Vec<String>) -> Self {
        self.bound.insert(name.to_owned(), groups);
        self
    }

    /// Group `group` of `name`; empty when either is unknown.
    fn group(&self, name: &str, group: usize) -> String {
        self.bound
            .get(name)
            .and_then(|groups| groups.get(group))
            .cloned()
            .unwrap_or_default()
    }

    /// What `${key}` stands for: `name`, `name[N]` (group N), or `N` (group N of the
    /// extension's match).
    fn get(&self, key: &str) -> String {
        if let Ok(group) = key.parse::<usize>() {
            return self.group("extension", group);
        }
        if let Some((name, group)) = key
            .strip_suffix(']')
            .and_then(|inner| inner.rsplit_once('['))
            && let Ok(group) = group.parse::<usize>()
        {
            return self.group(name, group);
        }
        self.group(key, 0)
    }

    /// `text` with `${key}` and `$N` replaced and `\x` made `x`.
    fn substitute(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(['\\', '$']) {
            out.push_str(&rest[..at]);
            let mark = &rest[at..at + 1];
            let after = &rest[at + 1..];
            let mut chars = after.chars();
            rest = match (mark, chars.next()) {
                (_, None) => {
                    out.push_str(mark);
                    ""
                }
                ("\\", Some(escaped)) => {
                    out.push(escaped);
                    chars.as_str()
                }
                (_, Some('{')) => match after.find('}') {
                    Some(close) => {
                        out.push_str(&self.get(&after[1..close]));
                        &after[close + 1..]
                    }
                    None => {
                        out.push_str("${");
                        &after[1..]
                    }
                },
                (_, Some(digit @ '0'..='9')) => {
                    out.push_str(&self.get(&digit.to_string()));
                    chars.as_str()
                }
                (_, Some(_)) => {
                    out.push('$');
                    after
                }
            };
        }
        out.push_str(rest);
        out
    }
}
