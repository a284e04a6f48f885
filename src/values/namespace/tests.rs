use super::*;
use crate::values::HandleValue;

fn names<'a>(handle: &'a str, base: &'a str, extension: &'a str) -> Names<'a> {
    Names {
        handle,
        base,
        extension,
    }
}

/// The values `xml`'s templates make for `extension` of base `10.5555/base`, or
/// `None` for not found.
fn derive(
    xml: &str,
    extension: &str,
    base_values: &[HandleValue],
) -> Option<Vec<(u32, String, String)>> {
    let namespace = Namespace::parse(xml.as_bytes()).expect("parses");
    let handle = format!("10.5555/base@{extension}");
    let mut derivation = Derivation::new(names(&handle, "10.5555/base", extension), base_values);
    for template in namespace.templates() {
        let Template::Rules { rules, .. } = template else {
            panic!("cited template in a test");
        };
        if derivation.apply(rules).expect("derives") == Outcome::NotFound {
            return None;
        }
    }
    let values = derivation.into_values();
    Some(
        values
            .into_iter()
            .map(|v| {
                let data = String::from_utf8(v.data).expect("utf-8");
                (v.index.0, v.value_type, data)
            })
            .collect(),
    )
}

fn triple(index: u32, value_type: &str, data: &str) -> (u32, String, String) {
    (index, value_type.to_owned(), data.to_owned())
}

#[test]
fn the_first_templates_delimiter_is_the_namespaces() {
    let xml = r##"<namespace><contact>a@b</contact><template delimiter="@"><value type="URL" data="x"/></template><template delimiter="#"/></namespace>"##;
    let namespace = Namespace::parse(xml.as_bytes()).expect("parses");
    assert_eq!(namespace.delimiter(), Some("@"));
    assert_eq!(namespace.templates().len(), 2);
    let none = Namespace::parse(b"<namespace><status>active</status></namespace>").expect("parses");
    assert_eq!(none.delimiter(), None);
    let empty =
        Namespace::parse(br#"<namespace><template delimiter=""/></namespace>"#).expect("parses");
    assert_eq!(empty.delimiter(), None);
}

#[test]
fn handles_split_at_the_first_delimiter_after_the_prefix() {
    assert_eq!(
        split("10.5555/abc@x@y", 7, "@"),
        Some(("10.5555/abc", "x@y"))
    );
    assert_eq!(split("10.5555/abc", 7, "/"), Some(("10.5555", "abc")));
    assert_eq!(split("10.55@55/abc@x", 8, "@"), Some(("10.55@55/abc", "x")));
    assert_eq!(split("10.5555/abc", 7, "@"), None);
    assert_eq!(split("10.5555/abc", 7, ""), None);
    assert_eq!(split("10", 7, "/"), None);
}

#[test]
fn names_are_substituted_and_escapes_kept_literal() {
    let xml = r#"<template delimiter="@">
        <value type="URL" data="https://e.org/${base}/${extension}?h=${handle}&amp;u=${nobody}"/>
        <value index="7" type="DESC">\${extension} costs \$5 and $</value>
      </template>"#;
    let values = derive(xml, "p1", &[]).expect("found");
    assert_eq!(
        values,
        [
            triple(
                1,
                "URL",
                "https://e.org/10.5555/base/p1?h=10.5555/base@p1&u="
            ),
            triple(7, "DESC", "${extension} costs $5 and $"),
        ]
    );
}

#[test]
fn foreach_copies_base_values_changing_what_a_value_names() {
    let base = [
        HandleValue::new(1, "URL", "https://e.org/doc"),
        HandleValue::new(2, "EMAIL", "a@e.org"),
    ];
    let xml = r#"<namespace><template delimiter="@"><foreach>
        <if value="type" test="equals" expression="URL">
          <value data="${data}?page=${extension}"/>
        </if>
        <else><value/></else>
      </foreach></template></namespace>"#;
    let values = derive(xml, "12", &base).expect("found");
    assert_eq!(
        values,
        [
            triple(1, "URL", "https://e.org/doc?page=12"),
            triple(2, "EMAIL", "a@e.org"),
        ]
    );
}

#[test]
fn matches_binds_groups_and_else_takes_the_rest() {
    let xml = r#"<template delimiter="@">
        <if value="extension" test="matches" expression="page(\d+)-(\w+)" parameter="m">
          <value type="URL" data="https://e.org/${base}#${m[1]}/${m[2]}/${m[9]}"/>
        </if>
        <else><notfound/></else>
      </template>"#;
    let values = derive(xml, "PAGE12-intro", &[]).expect("found");
    assert_eq!(
        values,
        [triple(1, "URL", "https://e.org/10.5555/base#12/intro/")]
    );
    assert_eq!(derive(xml, "chapter3", &[]), None);
    assert_eq!(
        derive(xml, "page12-intro-more!", &[]),
        None,
        "whole match only"
    );
}

#[test]
fn extension_groups_are_dollar_digits_and_negation_inverts() {
    let xml = r#"<template delimiter="@">
        <if test="matches" expression="v(\d)"><value type="V" data="$1 ${1}"/></if>
        <if test="equals" expression="x" negate="true"><value type="NOT_X" data="${extension}"/></if>
      </template>"#;
    assert_eq!(
        derive(xml, "v3", &[]).expect("found"),
        [triple(1, "V", "3 3"), triple(2, "NOT_X", "v3")]
    );
    assert_eq!(derive(xml, "x", &[]).expect("found"), []);
}

#[test]
fn def_binds_the_first_values_data_for_the_rules_after_it() {
    let xml = r#"<template delimiter="@">
        <def parameter="site">
          <if test="equals" expression="eu"><value type="S" data="eu.e.org"/></if>
          <else><value type="S" data="www.e.org"/></else>
        </def>
        <value type="URL" data="https://${site}/${base}"/>
      </template>"#;
    assert_eq!(
        derive(xml, "eu", &[]).expect("found"),
        [triple(1, "URL", "https://eu.e.org/10.5555/base")]
    );
    assert_eq!(
        derive(xml, "us", &[]).expect("found"),
        [triple(1, "URL", "https://www.e.org/10.5555/base")]
    );
}

#[test]
fn taken_indexes_move_to_the_next_free_one() {
    let base = [
        HandleValue::new(1, "URL", "a"),
        HandleValue::new(2, "URL", "b"),
    ];
    let xml = r#"<template delimiter="@">
        <value index="2" type="X" data="x"/>
        <foreach><value/></foreach>
        <value index="0" type="Y" data="y"/>
      </template>"#;
    let indexes: Vec<u32> = derive(xml, "e", &base)
        .expect("found")
        .iter()
        .map(|v| v.0)
        .collect();
    assert_eq!(indexes, [2, 1, 3, 4]);
}

#[test]
fn a_value_of_elements_keeps_them_as_written() {
    let xml = r#"<template delimiter="@"><value type="10320/loc"><locations><location href="https://e.org/${extension}" weight="1"/></locations></value></template>"#;
    assert_eq!(
        derive(xml, "a", &[]).expect("found"),
        [triple(
            1,
            "10320/loc",
            r#"<locations><location href="https://e.org/a" weight="1"/></locations>"#
        )]
    );
}

#[test]
fn a_value_without_type_or_data_outside_foreach_makes_nothing() {
    let xml = r#"<template delimiter="@"><value type="URL"/><value data="x"/></template>"#;
    assert_eq!(derive(xml, "a", &[]).expect("found"), []);
}

#[test]
fn cited_templates_name_their_value() {
    let xml = r#"<namespace><template delimiter="@" ref="3:10.5555/tpl"/></namespace>"#;
    let namespace = Namespace::parse(xml.as_bytes()).expect("parses");
    assert_eq!(namespace.delimiter(), Some("@"));
    match namespace.templates() {
        [Template::Cited { index, handle, .. }] => {
            assert_eq!((*index, handle.as_str()), (3, "10.5555/tpl"));
        }
        other => panic!("not one cited template: {other:?}"),
    }
}

#[test]
fn malformed_namespaces_are_refused_with_the_reason() {
    let cases: [(&[u8], &str); 12] = [
        (b"<namespace><template>", "not well-formed XML"),
        (b"not xml at all", "not well-formed XML"),
        (b"\xff\xfe<namespace/>", "not UTF-8"),
        (
            br#"<!DOCTYPE n [<!ENTITY a "b">]><namespace/>"#,
            "not well-formed XML",
        ),
        (
            b"<template><valeu/></template>",
            "unknown template element <valeu>",
        ),
        (
            b"<template><else/></template>",
            "<else> must follow an <if>",
        ),
        (
            b"<template><def/></template>",
            "<def> needs a parameter attribute",
        ),
        (
            br#"<template><if test="starts" expression="a"/></template>"#,
            "the tests are equals and matches",
        ),
        (
            br#"<template><if test="matches"/></template>"#,
            "a test needs an expression",
        ),
        (
            br#"<template><if test="matches" expression="a)|(b"/></template>"#,
            "expression",
        ),
        (
            br#"<template><value index="x"/></template>"#,
            "index=\"x\" is not valid",
        ),
        (br#"<template ref="tpl"/>"#, "not index:handle"),
    ];
    for (xml, reason) in cases {
        let error = Namespace::parse(xml).expect_err("refused");
        assert!(
            error.to_string().contains(reason),
            "{:?}: {error} lacks {reason:?}",
            String::from_utf8_lossy(xml)
        );
    }
}

#[test]
fn expressions_are_bounded_and_counted_at_their_memory_bound() {
    let with = |count: usize| {
        let test = r#"<if test="matches" expression="[0-9]+"><value type="URL" data="x"/></if>"#;
        format!("<template>{}</template>", test.repeat(count))
    };
    let most = Namespace::parse(with(MAX_EXPRESSIONS).as_bytes()).expect("parses");
    assert_eq!(
        most.expression_octets(),
        MAX_EXPRESSIONS * 2 * MAX_REGEX_OCTETS
    );
    assert_eq!(
        Namespace::parse(with(MAX_EXPRESSIONS + 1).as_bytes()).unwrap_err(),
        NamespaceError::TooManyExpressions {
            count: MAX_EXPRESSIONS + 1,
            limit: MAX_EXPRESSIONS
        }
    );
    let none = Namespace::parse(b"<template><value type=\"URL\" data=\"x\"/></template>");
    assert_eq!(none.expect("parses").expression_octets(), 0);
}

#[test]
fn bounds_refuse_large_deep_and_busy_namespaces() {
    let large = format!(
        "<namespace>{}</namespace>",
        " ".repeat(MAX_NAMESPACE_OCTETS)
    );
    assert!(matches!(
        Namespace::parse(large.as_bytes()),
        Err(NamespaceError::TooLarge { .. })
    ));
    let deep = format!(
        "<template>{}{}</template>",
        "<if>".repeat(MAX_RULE_DEPTH + 1),
        "</if>".repeat(MAX_RULE_DEPTH + 1)
    );
    assert_eq!(
        Namespace::parse(deep.as_bytes()).unwrap_err(),
        NamespaceError::TooDeep {
            limit: MAX_RULE_DEPTH
        }
    );
    let nested_ok = format!(
        "<template>{}{}</template>",
        "<if>".repeat(MAX_RULE_DEPTH - 1),
        "</if>".repeat(MAX_RULE_DEPTH - 1)
    );
    assert!(Namespace::parse(nested_ok.as_bytes()).is_ok());
    let many_nodes = format!(
        "<template>{}</template>",
        "<notfound/>".repeat(MAX_XML_NODES as usize)
    );
    assert!(matches!(
        Namespace::parse(many_nodes.as_bytes()),
        Err(NamespaceError::Xml(_))
    ));
}

/// What deriving from `base` with the one template of `xml` comes to.
fn apply_one(xml: &str, base: &[HandleValue]) -> Result<Outcome, DeriveError> {
    let namespace = Namespace::parse(xml.as_bytes()).expect("parses");
    let Template::Rules { rules, .. } = &namespace.templates()[0] else {
        panic!("rules expected");
    };
    Derivation::new(names("h", "b", "e"), base).apply(rules)
}

#[test]
fn derivations_stop_at_their_bounds() {
    let many: Vec<HandleValue> = (1..=200).map(|i| HandleValue::new(i, "URL", "x")).collect();
    let two_each = r#"<template><foreach><value/><value type="COPY"/></foreach></template>"#;
    assert_eq!(
        apply_one(two_each, &many),
        Err(DeriveError::TooManyValues {
            limit: MAX_DERIVED_VALUES
        })
    );
    let big = [HandleValue::new(1, "URL", vec![b'a'; 60 * 1024])];
    let fivefold = r#"<template><foreach><value data="${data}${data}${data}${data}${data}"/></foreach></template>"#;
    assert_eq!(
        apply_one(fivefold, &big),
        Err(DeriveError::TooLarge {
            limit: MAX_DERIVED_OCTETS
        })
    );
    let busy = format!(
        "<template><foreach>{}</foreach></template>",
        r#"<if test="equals" expression="never"/>"#.repeat(400)
    );
    assert_eq!(
        apply_one(&busy, &many),
        Err(DeriveError::TooLong {
            limit: MAX_RULE_VISITS
        })
    );
    let once = r#"<template><foreach><value data="${data}${data}"/></foreach></template>"#;
    assert_eq!(apply_one(once, &big), Ok(Outcome::Done));
}

#[test]
fn notfound_anywhere_makes_the_handle_missing() {
    let base = [HandleValue::new(1, "URL", "a")];
    let xml = r#"<template><value type="X" data="x"/><foreach><if value="data" test="equals" expression="a"><notfound/></if></foreach></template>"#;
    assert_eq!(derive(xml, "e", &base), None);
}
