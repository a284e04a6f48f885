//! The `Authorization: Handle …` header of the REST API (`HANDLE-NET-REFERENCE.md`
//! §1.2): `sessionId`, and for an answer `id`, `type`, `cnonce`, `alg`, `signature`
//! (with `salt`, `iterations`, `length` for PBKDF2), as `name="value"` or `name=value`
//! pairs separated by commas, in any order.
//!
//! Owns the sans-IO parser [`parse_params`], its reading [`parse_handle`] into a
//! [`HandleAuthorization`], and [`ParamError`]; the client side, which writes these
//! headers, is `client::authorization`. Depends on [`crate::auth::rest`] for what an
//! answer means and on [`super::sessions`] for the id type; no sockets, no clock, no
//! table look-ups.
//!
//! Invariants: at most [`MAX_PARAMS`] parameters, none twice; every base64 value is
//! bounded after decoding; nothing here panics on any input.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use thiserror::Error;

use super::sessions::SessionId;
use crate::auth::answer::{AuthType, MAX_ANSWER_LEN};
use crate::auth::rest::{MAX_CNONCE_LEN, Pbkdf2Params, RestAlgorithm, RestAnswer, RestProof};
use crate::auth::secret::MAX_SALT_LEN;
use crate::auth::{AuthError, Identity};
use crate::config::parse_identity;

/// The most parameters read.
pub const MAX_PARAMS: usize = 16;
/// The longest session id accepted.
const MAX_SESSION_ID_LEN: usize = 128;

/// Why a `Handle` header was not understood.
#[derive(Debug, Error)]
pub enum ParamError {
    /// The text is not a list of parameters.
    #[error("Authorization: Handle, at character {at}: {reason}")]
    Syntax {
        /// Where, in characters after the scheme.
        at: usize,
        /// What was expected.
        reason: &'static str,
    },
    /// A parameter appears twice.
    #[error("parameter {0} is given twice")]
    Duplicate(String),
    /// Too many parameters.
    #[error("more than {MAX_PARAMS} parameters")]
    TooMany,
    /// A parameter needed is missing.
    #[error("parameter {0} is missing")]
    Missing(&'static str),
    /// A value is not base64.
    #[error("parameter {0} is not base64")]
    Base64(&'static str),
    /// A value is longer than allowed.
    #[error("parameter {name} is {len} octets long, more than {max}")]
    TooLong {
        /// The parameter.
        name: &'static str,
        /// Its length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A value is not a decimal `u32`.
    #[error("parameter {0} is not a number")]
    Number(&'static str),
    /// `id` is not `index:handle`.
    #[error("parameter id is not index:handle")]
    Identity,
    /// `type` is neither `HS_PUBKEY` nor `HS_SECKEY`.
    #[error("parameter type {0:?} is neither HS_PUBKEY nor HS_SECKEY")]
    Type(String),
    /// `alg` names no algorithm we accept.
    #[error("parameter alg {0:?} is not SHA1, SHA256, HMAC-SHA1, HMAC-SHA256 or PBKDF2-HMAC-SHA1")]
    Algorithm(String),
    /// `version` is not 0.
    #[error("version {0:?} of Authorization: Handle is not supported (only 0)")]
    Version(String),
    /// `clientCert="true"`: TLS client certificates are not supported.
    #[error("client certificates are not supported")]
    ClientCert,
    /// The answer's parts do not fit together.
    #[error(transparent)]
    Answer(#[from] AuthError),
}

/// What a `Handle` header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandleAuthorization {
    /// No session and no answer (e.g. only `version` and `cnonce`, as before a
    /// session is opened): the request is anonymous.
    Nothing,
    /// Only `sessionId`: the request runs as whoever authenticated the session.
    Session(SessionId),
    /// An answer to the session's nonce.
    Answer {
        /// The session answered.
        session: SessionId,
        /// The answer.
        answer: RestAnswer,
    },
}

/// The parameters after the scheme, names lower-cased, values unquoted, in order.
pub fn parse_params(text: &str) -> Result<Vec<(String, String)>, ParamError> {
    let mut chars = text.chars().enumerate().peekable();
    let mut params: Vec<(String, String)> = Vec::new();
    loop {
        while chars
            .next_if(|&(_, c)| c == ',' || c.is_whitespace())
            .is_some()
        {}
        let Some(&(at, _)) = chars.peek() else {
            return Ok(params);
        };
        let name = take_while(&mut chars, |c| c.is_ascii_alphanumeric() || c == '_');
        if name.is_empty() {
            return Err(syntax(at, "expected a parameter name"));
        }
        skip_spaces(&mut chars);
        if chars.next_if(|&(_, c)| c == '=').is_none() {
            return Err(syntax(at, "expected '=' after the parameter name"));
        }
        skip_spaces(&mut chars);
        let value = match chars.next_if(|&(_, c)| c == '"') {
            Some((start, _)) => quoted(&mut chars, start)?,
            None => take_while(&mut chars, |c| c != ',' && c != '"' && !c.is_whitespace()),
        };
        skip_spaces(&mut chars);
        if let Some(&(at, c)) = chars.peek()
            && c != ','
        {
            return Err(syntax(at, "expected ',' between parameters"));
        }
        let name = name.to_ascii_lowercase();
        if params.iter().any(|(seen, _)| *seen == name) {
            return Err(ParamError::Duplicate(name));
        }
        if params.len() == MAX_PARAMS {
            return Err(ParamError::TooMany);
        }
        params.push((name, value));
    }
}

type Chars<'a> = std::iter::Peekable<std::iter::Enumerate<std::str::Chars<'a>>>;

fn take_while(chars: &mut Chars<'_>, keep: impl Fn(char) -> bool) -> String {
    let mut taken = String::new();
    while let Some((_, c)) = chars.next_if(|&(_, c)| keep(c)) {
        taken.push(c);
    }
    taken
}

fn skip_spaces(chars: &mut Chars<'_>) {
    while chars.next_if(|&(_, c)| c == ' ' || c == '\t').is_some() {}
}

/// The rest of a quoted string whose opening quote was at `start` (`\` escapes the
/// next character).
fn quoted(chars: &mut Chars<'_>, start: usize) -> Result<String, ParamError> {
    let mut value = String::new();
    loop {
        match chars.next() {
            None => return Err(syntax(start, "unterminated quoted value")),
            Some((_, '"')) => return Ok(value),
            Some((at, '\\')) => match chars.next() {
                Some((_, c)) => value.push(c),
                None => return Err(syntax(at, "unterminated quoted value")),
            },
            Some((_, c)) => value.push(c),
        }
    }
}

fn syntax(at: usize, reason: &'static str) -> ParamError {
    ParamError::Syntax { at, reason }
}

/// Reads the parameters of a `Handle` header (the text after the scheme).
pub fn parse_handle(text: &str) -> Result<HandleAuthorization, ParamError> {
    let params = parse_params(text)?;
    let get = |name: &str| {
        params
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, value)| value.as_str())
    };
    if let Some(version) = get("version")
        && version != "0"
    {
        return Err(ParamError::Version(version.to_owned()));
    }
    if get("clientcert").is_some_and(|flag| flag.eq_ignore_ascii_case("true")) {
        return Err(ParamError::ClientCert);
    }
    let answering = ["id", "type", "alg", "signature"]
        .iter()
        .any(|name| get(name).is_some());
    let session = match get("sessionid") {
        None if answering => return Err(ParamError::Missing("sessionId")),
        None => return Ok(HandleAuthorization::Nothing),
        Some(id) if id.is_empty() || id.len() > MAX_SESSION_ID_LEN => {
            return Err(ParamError::TooLong {
                name: "sessionId",
                len: id.len(),
                max: MAX_SESSION_ID_LEN,
            });
        }
        Some(id) => SessionId(id.to_owned()),
    };
    if !answering {
        return Ok(HandleAuthorization::Session(session));
    }
    let answer = answer(&get)?;
    Ok(HandleAuthorization::Answer { session, answer })
}

/// The answer parameters, each required one present and bounded.
fn answer<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Result<RestAnswer, ParamError> {
    let required =
        |name: &'static str| get(&name.to_ascii_lowercase()).ok_or(ParamError::Missing(name));
    let identity: Identity = parse_identity(required("id")?).ok_or(ParamError::Identity)?;
    let auth_type = match required("type")? {
        "HS_PUBKEY" => AuthType::PublicKey,
        "HS_SECKEY" => AuthType::SecretKey,
        other => return Err(ParamError::Type(other.chars().take(64).collect())),
    };
    let alg_name = required("alg")?;
    let alg = RestAlgorithm::from_name(alg_name)
        .ok_or_else(|| ParamError::Algorithm(alg_name.chars().take(64).collect()))?;
    let cnonce = base64(required("cnonce")?, "cnonce", MAX_CNONCE_LEN)?;
    let signature = base64(required("signature")?, "signature", MAX_ANSWER_LEN)?;
    let pbkdf2 = if alg == RestAlgorithm::Pbkdf2HmacSha1 {
        Some(Pbkdf2Params {
            salt: base64(required("salt")?, "salt", MAX_SALT_LEN)?,
            iterations: number(required("iterations")?, "iterations")?,
            key_bits: number(required("length")?, "length")?,
        })
    } else {
        None
    };
    let proof = RestProof::new(auth_type, alg, signature, pbkdf2)?;
    Ok(RestAnswer {
        identity,
        cnonce,
        proof,
    })
}

/// Decodes base64 of at most `max` octets (checked on the text first, so an
/// oversized value is not decoded).
fn base64(text: &str, name: &'static str, max: usize) -> Result<Vec<u8>, ParamError> {
    let too_long = |len| ParamError::TooLong { name, len, max };
    if text.len() / 4 * 3 > max + 2 {
        return Err(too_long(text.len() / 4 * 3));
    }
    let octets = STANDARD
        .decode(text)
        .map_err(|_| ParamError::Base64(name))?;
    if octets.len() > max {
        return Err(too_long(octets.len()));
    }
    Ok(octets)
}

fn number(text: &str, name: &'static str) -> Result<u32, ParamError> {
    text.parse().map_err(|_| ParamError::Number(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::SecretAnswer;
    use crate::client::authorization::{answer_header, session_header};

    fn secret_answer() -> RestAnswer {
        RestAnswer {
            identity: Identity {
                handle: "0.NA/TEST".into(),
                index: 300,
            },
            cnonce: vec![7; 16],
            proof: RestProof::Secret(SecretAnswer::Pbkdf2 {
                salt: vec![1; 16],
                iterations: 10_000,
                key_bits: 160,
                mac: vec![9; 20],
            }),
        }
    }

    #[test]
    fn quoted_unquoted_reordered_and_spaced_parameters_read_alike() {
        let expected = vec![
            ("sessionid".to_owned(), "abc".to_owned()),
            ("cnonce".to_owned(), "AQ==".to_owned()),
        ];
        for text in [
            r#"sessionId="abc", cnonce="AQ==""#,
            "sessionId=abc,cnonce=AQ==",
            " SESSIONID = \"abc\" ,\t cnonce = AQ== , ",
            r#"sessionId="a\bc",cnonce="AQ==""#,
        ] {
            assert_eq!(parse_params(text).unwrap(), expected, "{text}");
        }
        let reordered = parse_params("cnonce=AQ==, sessionId=abc").unwrap();
        assert_eq!(reordered.len(), 2);
    }

    #[test]
    fn malformed_parameter_lists_are_refused() {
        for text in [
            "sessionId",
            "=abc",
            "sessionId=\"abc",
            "sessionId=abc cnonce=x",
            "sessionId=\"a\"b",
        ] {
            assert!(
                matches!(parse_params(text), Err(ParamError::Syntax { .. })),
                "{text}"
            );
        }
        assert!(matches!(
            parse_params("a=1, A=2"),
            Err(ParamError::Duplicate(name)) if name == "a"
        ));
        let many: Vec<String> = (0..=MAX_PARAMS).map(|i| format!("p{i}=1")).collect();
        assert!(matches!(
            parse_params(&many.join(",")),
            Err(ParamError::TooMany)
        ));
    }

    #[test]
    fn an_answer_header_reads_back_as_the_answer() {
        let answer = secret_answer();
        let header = answer_header("s1", &answer).unwrap();
        let text = header.strip_prefix("Handle ").unwrap();
        assert_eq!(
            parse_handle(text).unwrap(),
            HandleAuthorization::Answer {
                session: SessionId("s1".into()),
                answer
            }
        );
        assert_eq!(
            parse_handle(session_header("s1").strip_prefix("Handle ").unwrap()).unwrap(),
            HandleAuthorization::Session(SessionId("s1".into()))
        );
        assert_eq!(
            parse_handle(r#"version="0", cnonce="AQ==""#).unwrap(),
            HandleAuthorization::Nothing
        );
    }

    #[test]
    fn bad_answers_name_their_problem() {
        let good = r#"sessionId=s, id="300:0.NA/T", type=HS_PUBKEY, cnonce=AQ==, alg=SHA256, signature=AQ=="#;
        assert!(parse_handle(good).is_ok());
        let cases: [(&str, &str, &str); 8] = [
            ("sessionId=s, ", "", "missing sessionId"),
            ("cnonce=AQ==", "cnonce=!!", "bad base64"),
            ("type=HS_PUBKEY", "type=HS_FOO", "unknown type"),
            ("alg=SHA256", "alg=MD5", "MD5"),
            ("alg=SHA256", "alg=HMAC-SHA1", "HMAC for a public key"),
            ("id=\"300:0.NA/T\"", "id=nobody", "id not index:handle"),
            ("signature=AQ==", "", "missing signature"),
            ("sessionId=s", "sessionId=s, version=1", "version"),
        ];
        for (from, to, why) in cases {
            let text = good.replace(from, to);
            let text = text.trim_end_matches([',', ' ']);
            assert!(parse_handle(text).is_err(), "{why}: {text}");
        }
        let huge = format!("AQ{}", "A".repeat(4 * MAX_CNONCE_LEN));
        assert!(matches!(
            parse_handle(&good.replace("cnonce=AQ==", &format!("cnonce={huge}"))),
            Err(ParamError::TooLong { name: "cnonce", .. })
        ));
        let pbkdf2 = good
            .replace("HS_PUBKEY", "HS_SECKEY")
            .replace("SHA256", "PBKDF2-HMAC-SHA1");
        assert!(matches!(
            parse_handle(&pbkdf2),
            Err(ParamError::Missing("salt"))
        ));
        let with_params = format!("{pbkdf2}, salt=AQ==, iterations=ten, length=160");
        assert!(matches!(
            parse_handle(&with_params),
            Err(ParamError::Number("iterations"))
        ));
        assert!(matches!(
            parse_handle(r#"clientCert="true""#),
            Err(ParamError::ClientCert)
        ));
    }
}
