//! `10320/loc` values: an XML list of locations the proxy chooses a redirect from
//! (digest §6.7; J9 `servlet_proxy/handlers/Location.java`).
//!
//! `<locations [chooseby="…"]><location href="…" [weight="0..1"] [id="…"] [http="301|303|307|308"] …/>…</locations>`.
//! Reading is tolerant, as the reference's is: only `<location …>` tags are looked at,
//! attributes are `name="value"` or `name='value'` with the five XML entities decoded,
//! and a location without `href` is skipped. Choosing: when `locatt=key:value` is
//! given and some locations carry that attribute value, only those are candidates;
//! then one is drawn at random in proportion to its `weight` (default 1; weight 0 is
//! chosen only when every candidate has weight 0, then the first). `country`,
//! `address` and `score` choosers are not applied (a node knows no client
//! geography); they fall through to the weighted draw.

/// One `<location>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    /// Its attributes in written order, `href` among them.
    pub attributes: Vec<(String, String)>,
}

impl Location {
    /// The value of attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The redirect target.
    pub fn href(&self) -> &str {
        self.attribute("href").unwrap_or_default()
    }

    fn weight(&self) -> f64 {
        self.attribute("weight")
            .and_then(|weight| weight.trim().parse::<f64>().ok())
            .filter(|weight| weight.is_finite() && *weight >= 0.0)
            .unwrap_or(1.0)
    }
}

/// The locations of a `10320/loc` document that have an `href`.
pub fn parse(xml: &str) -> Vec<Location> {
    let mut locations = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<location") {
        rest = &rest[start + "<location".len()..];
        // `<locations …>` is the container, not a location.
        if !rest.starts_with(|c: char| c.is_whitespace() || c == '/' || c == '>') {
            continue;
        }
        let end = rest.find('>').unwrap_or(rest.len());
        let location = Location {
            attributes: attributes(&rest[..end]),
        };
        rest = &rest[end..];
        if location.attribute("href").is_some() {
            locations.push(location);
        }
    }
    locations
}

/// `name="value"` pairs of a tag's inside.
fn attributes(mut tag: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    while let Some(equals) = tag.find('=') {
        let name = tag[..equals].trim().trim_start_matches('/').trim();
        let after = tag[equals + 1..].trim_start();
        let Some(quote) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            break;
        };
        let body = &after[1..];
        let Some(close) = body.find(quote) else { break };
        found.push((name.to_owned(), unescape(&body[..close])));
        tag = &body[close + 1..];
    }
    found
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The location to redirect to, given `locatt` (`key:value`) and a uniform random
/// number `draw` in `[0, 1)`.
pub fn choose<'a>(
    locations: &'a [Location],
    locatt: Option<&str>,
    draw: f64,
) -> Option<&'a Location> {
    let matching: Vec<&Location> = match locatt.and_then(|wanted| wanted.split_once(':')) {
        Some((key, value)) => locations
            .iter()
            .filter(|location| location.attribute(key) == Some(value))
            .collect(),
        None => Vec::new(),
    };
    let candidates: Vec<&Location> = if matching.is_empty() {
        locations.iter().collect()
    } else {
        matching
    };
    let total: f64 = candidates.iter().map(|location| location.weight()).sum();
    if total <= 0.0 {
        return candidates.first().copied();
    }
    let mut point = draw.clamp(0.0, 1.0) * total;
    for location in &candidates {
        point -= location.weight();
        if point < 0.0 && location.weight() > 0.0 {
            return Some(location);
        }
    }
    candidates.iter().rev().find(|l| l.weight() > 0.0).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<locations chooseby="locatt,weighted">
        <location id="0" href="http://a.example/?x=1&amp;y=2" weight="0"/>
        <location id='1' href='http://b.example/' weight="1" country="gb" />
        <location id="2" weight="1"/>
        <location id="3" href="http://c.example/" weight="3" http="303"></location>
    </locations>"#;

    #[test]
    fn parses_locations_with_href() {
        let locations = parse(XML);
        let hrefs: Vec<_> = locations.iter().map(Location::href).collect();
        assert_eq!(
            hrefs,
            [
                "http://a.example/?x=1&y=2",
                "http://b.example/",
                "http://c.example/"
            ]
        );
        assert_eq!(locations[2].attribute("http"), Some("303"));
        assert!(parse("<locations></locations>").is_empty());
        assert!(parse("<location href=\"unterminated").is_empty());
    }

    #[test]
    fn locatt_then_weights_choose() {
        let locations = parse(XML);
        let chosen = |locatt, draw| choose(&locations, locatt, draw).map(Location::href);
        assert_eq!(chosen(Some("id:0"), 0.9), Some("http://a.example/?x=1&y=2"));
        assert_eq!(chosen(Some("country:gb"), 0.9), Some("http://b.example/"));
        assert_eq!(chosen(Some("id:9"), 0.0), Some("http://b.example/"));
        assert_eq!(chosen(None, 0.0), Some("http://b.example/"));
        assert_eq!(chosen(None, 0.3), Some("http://c.example/"));
        assert_eq!(chosen(None, 0.999), Some("http://c.example/"));
        assert_eq!(choose(&[], None, 0.5), None);
    }
}
