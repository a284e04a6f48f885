//! [`ServerAddress`]: the `server[:port]` authority of an `hdl://` URI (and of a proxy
//! URL, which is validated the same way).
//!
//! Accepted hosts: a registered name or IPv4 address made of ASCII letters, digits,
//! `-`, `.` and `_` (internationalized names must be given in their `xn--` form), or an
//! IPv6 address in brackets. The port, if given, is 1–65535. User information
//! (`user@host`) is refused. The host is kept as written, without the brackets.

use std::fmt;
use std::net::Ipv6Addr;

use super::error::NameError;

/// The handle server an `hdl://server[:port]/handle` URI asks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerAddress {
    /// Host name or address as written; an IPv6 address without its brackets.
    pub host: String,
    /// The port, if one was given; callers fall back to 2641.
    pub port: Option<u16>,
}

impl ServerAddress {
    /// Parses an authority: `host`, `host:port`, `[v6]` or `[v6]:port`.
    pub(super) fn parse(authority: &[u8]) -> Result<ServerAddress, NameError> {
        let bad = |reason| NameError::BadServer {
            text: String::from_utf8_lossy(authority).into_owned(),
            reason,
        };
        let text = std::str::from_utf8(authority).map_err(|_| bad("not ASCII"))?;
        let (host, after) = match text.strip_prefix('[') {
            Some(bracketed) => {
                let (v6, after) = bracketed.split_once(']').ok_or_else(|| bad("no ']'"))?;
                v6.parse::<Ipv6Addr>()
                    .map_err(|_| bad("not an IPv6 address"))?;
                (v6, after)
            }
            None => {
                let (host, after) = text.split_at(text.find(':').unwrap_or(text.len()));
                check_host(host).map_err(bad)?;
                (host, after)
            }
        };
        let port = match after {
            "" => None,
            _ => {
                let digits = after
                    .strip_prefix(':')
                    .ok_or_else(|| bad("text after ']'"))?;
                Some(parse_port(digits).map_err(bad)?)
            }
        };
        Ok(ServerAddress {
            host: host.to_owned(),
            port,
        })
    }
}

/// Checks a registered name or IPv4 address.
fn check_host(host: &str) -> Result<(), &'static str> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
    if host.is_empty() {
        Err("empty host")
    } else if !host.bytes().all(allowed) {
        Err("a host may hold only ASCII letters, digits, '-', '.' and '_'")
    } else {
        Ok(())
    }
}

/// Parses a port: 1 to 5 digits, 1–65535.
fn parse_port(digits: &str) -> Result<u16, &'static str> {
    const BAD: &str = "the port must be a number from 1 to 65535";
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BAD);
    }
    match digits.parse::<u16>() {
        Ok(0) | Err(_) => Err(BAD),
        Ok(port) => Ok(port),
    }
}

impl fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServerAddress, NameError> {
        ServerAddress::parse(text.as_bytes())
    }

    #[test]
    fn hosts_ports_and_ipv6_round_trip_through_display() {
        let cases = [
            ("127.0.0.1:2641", "127.0.0.1", Some(2641)),
            ("hdl.handle.net", "hdl.handle.net", None),
            ("[::1]:2641", "::1", Some(2641)),
            ("[2001:db8::7]", "2001:db8::7", None),
            ("Example.ORG:65535", "Example.ORG", Some(65535)),
        ];
        for (text, host, port) in cases {
            let address = parse(text).unwrap();
            assert_eq!((address.host.as_str(), address.port), (host, port));
            assert_eq!(address.to_string(), text);
        }
    }

    #[test]
    fn malformed_authorities_are_refused() {
        let bad = [
            "",
            ":2641",
            "host:",
            "host:0",
            "host:65536",
            "host:+80",
            "host:80:81",
            "user@host",
            "[::1",
            "[nope]:1",
            "[::1]2641",
            "hôst",
            "host name",
        ];
        for text in bad {
            let err = parse(text).unwrap_err();
            assert!(matches!(err, NameError::BadServer { .. }), "{text:?}");
            assert!(err.to_string().starts_with("bad server address"));
        }
        assert!(ServerAddress::parse(b"h\xFFst").is_err());
    }
}
