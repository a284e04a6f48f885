//! The HS_NAMESPACE XML into a [`Namespace`]: roxmltree reads the XML (no DTD, at
//! most [`MAX_XML_NODES`] nodes); this module reads the elements into rules.

use regex::RegexBuilder;
use roxmltree::{Document, Node, ParsingOptions};

use super::{
    Condition, MAX_EXPRESSIONS, MAX_NAMESPACE_OCTETS, MAX_REGEX_OCTETS, MAX_RULE_DEPTH,
    MAX_XML_NODES, Namespace, NamespaceError, Rule, Template, Test,
};

impl Namespace {
    /// Parses an HS_NAMESPACE value's data: a root element (any name; `<namespace>`
    /// by custom) holding `<template>` elements, or a `<template>` itself (what a
    /// cited value may hold). Elements other than `<template>` under the root
    /// (`<contact>`, `<status>`, …) are not this module's and are passed over.
    pub fn parse(data: &[u8]) -> Result<Namespace, NamespaceError> {
        if data.len() > MAX_NAMESPACE_OCTETS {
            return Err(NamespaceError::TooLarge {
                octets: data.len(),
                limit: MAX_NAMESPACE_OCTETS,
            });
        }
        let text = std::str::from_utf8(data).map_err(|_| NamespaceError::NotUtf8)?;
        let options = ParsingOptions {
            nodes_limit: MAX_XML_NODES,
            ..ParsingOptions::default()
        };
        let document = Document::parse_with_options(text, options)
            .map_err(|error| NamespaceError::Xml(error.to_string()))?;
        let expressions = expressions_in(&document)?;
        let root = document.root_element();
        let templates = if root.has_tag_name("template") {
            vec![template(root)?]
        } else {
            elements(root)
                .filter(|node| node.has_tag_name("template"))
                .map(template)
                .collect::<Result<_, _>>()?
        };
        Ok(Namespace {
            templates,
            expressions,
        })
    }
}

/// How many `matches` expressions `document` holds, counted before any is compiled:
/// more than [`MAX_EXPRESSIONS`] is refused.
fn expressions_in(document: &Document<'_>) -> Result<usize, NamespaceError> {
    let count = document
        .descendants()
        .filter(|node| node.attribute("test") == Some("matches"))
        .count();
    if count > MAX_EXPRESSIONS {
        return Err(NamespaceError::TooManyExpressions {
            count,
            limit: MAX_EXPRESSIONS,
        });
    }
    Ok(count)
}

/// The element children of `node`.
fn elements<'a, 'input>(node: Node<'a, 'input>) -> impl Iterator<Item = Node<'a, 'input>> {
    node.children().filter(Node::is_element)
}

fn template(node: Node<'_, '_>) -> Result<Template, NamespaceError> {
    let delimiter = node.attribute("delimiter").map(str::to_owned);
    if let Some(cited) = node.attribute("ref") {
        let (index, handle) = cited_value(cited)?;
        return Ok(Template::Cited {
            delimiter,
            index,
            handle,
        });
    }
    Ok(Template::Rules {
        delimiter,
        rules: rules(node, 1)?,
    })
}

/// `index:handle` of a `<template ref=…>`.
fn cited_value(cited: &str) -> Result<(u32, String), NamespaceError> {
    let bad = |reason: &str| NamespaceError::BadAttribute {
        element: "template",
        attribute: "ref",
        value: cited.to_owned(),
        reason: reason.to_owned(),
    };
    let (index, handle) = cited
        .split_once(':')
        .ok_or_else(|| bad("not index:handle"))?;
    let index = index
        .trim()
        .parse::<u32>()
        .map_err(|_| bad("the index is not a number"))?;
    if handle.is_empty() {
        return Err(bad("no handle after the colon"));
    }
    Ok((index, handle.to_owned()))
}

/// The rules inside `node`, at nesting `depth`.
fn rules(node: Node<'_, '_>, depth: usize) -> Result<Vec<Rule>, NamespaceError> {
    if depth > MAX_RULE_DEPTH {
        return Err(NamespaceError::TooDeep {
            limit: MAX_RULE_DEPTH,
        });
    }
    let mut parsed = Vec::new();
    let mut last_if: Option<Condition> = None;
    for child in elements(node) {
        let rule = match child.tag_name().name() {
            "value" => value(child)?,
            "if" => {
                let condition = condition(child)?;
                last_if = Some(condition.clone());
                Rule::When {
                    condition,
                    rules: rules(child, depth + 1)?,
                }
            }
            "else" => {
                let mut condition = last_if.clone().ok_or(NamespaceError::ElseWithoutIf)?;
                condition.negate = !condition.negate;
                Rule::When {
                    condition,
                    rules: rules(child, depth + 1)?,
                }
            }
            "foreach" => Rule::ForEach(rules(child, depth + 1)?),
            "def" => Rule::Define {
                parameter: child
                    .attribute("parameter")
                    .ok_or(NamespaceError::MissingAttribute {
                        element: "def",
                        attribute: "parameter",
                    })?
                    .to_owned(),
                rules: rules(child, depth + 1)?,
            },
            "notfound" => Rule::NotFound,
            other => return Err(NamespaceError::UnknownElement(other.to_owned())),
        };
        parsed.push(rule);
    }
    Ok(parsed)
}

fn value(node: Node<'_, '_>) -> Result<Rule, NamespaceError> {
    let index = match node.attribute("index") {
        None => None,
        Some(text) => {
            Some(
                text.trim()
                    .parse::<u32>()
                    .map_err(|_| NamespaceError::BadAttribute {
                        element: "value",
                        attribute: "index",
                        value: text.to_owned(),
                        reason: "not a number".to_owned(),
                    })?,
            )
        }
    };
    let data = match node.attribute("data") {
        Some(data) => Some(data.to_owned()),
        None => content(node),
    };
    Ok(Rule::Value {
        index,
        value_type: node.attribute("type").map(str::to_owned),
        data,
    })
}

/// What a `<value>` without `data` holds: its text, or the XML of its elements as
/// written (entities left as they are), or nothing.
fn content(node: Node<'_, '_>) -> Option<String> {
    let first = node.first_element_child();
    let Some(first) = first else {
        return node
            .text()
            .filter(|text| !text.is_empty())
            .map(str::to_owned);
    };
    let last = node.last_element_child().unwrap_or(first);
    let source = node.document().input_text();
    source
        .get(first.range().start..last.range().end)
        .map(str::to_owned)
}

fn condition(node: Node<'_, '_>) -> Result<Condition, NamespaceError> {
    let subject = node.attribute("value").unwrap_or("extension").to_owned();
    let parameter = node.attribute("parameter").unwrap_or(&subject).to_owned();
    let negate = node.attribute("negate") == Some("true");
    let expression = node.attribute("expression");
    let test = match (node.attribute("test"), expression) {
        (None, None) => Test::Always,
        (None | Some("equals"), Some(expression)) => Test::Equals(expression.to_owned()),
        (Some("matches"), Some(expression)) => Test::Matches(whole_match(expression)?),
        (Some(test @ ("equals" | "matches")), None) => {
            return Err(NamespaceError::BadAttribute {
                element: "if",
                attribute: "test",
                value: test.to_owned(),
                reason: "a test needs an expression".to_owned(),
            });
        }
        (Some(other), _) => {
            return Err(NamespaceError::BadAttribute {
                element: "if",
                attribute: "test",
                value: other.to_owned(),
                reason: "the tests are equals and matches".to_owned(),
            });
        }
    };
    Ok(Condition {
        subject,
        parameter,
        test,
        negate,
    })
}

/// `expression` compiled to match a whole value, ignoring case (the reference's
/// `Matcher.matches()` on a case-insensitive server). It is compiled alone first, so
/// an unbalanced one is refused rather than escaping the anchors around it.
fn whole_match(expression: &str) -> Result<regex::Regex, NamespaceError> {
    let compile = |pattern: &str| {
        RegexBuilder::new(pattern)
            .case_insensitive(true)
            .size_limit(MAX_REGEX_OCTETS)
            .dfa_size_limit(MAX_REGEX_OCTETS)
            .build()
            .map_err(|error| NamespaceError::BadAttribute {
                element: "if",
                attribute: "expression",
                value: expression.to_owned(),
                reason: error.to_string(),
            })
    };
    compile(expression)?;
    compile(&format!(r"\A(?:{expression})\z"))
}
