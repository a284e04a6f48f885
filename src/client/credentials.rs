//! Who the client authenticates as, and its answers to challenges (digest §8.1–§8.4).
//!
//! Owns [`Credentials`] and [`Key`]. Pure: the answer to an RC_AUTHEN_NEEDED message
//! is computed with the authentication core ([`sign_public`], [`answer_secret`]) in
//! the answer formats of the challenge's version, as J9 answers.

use std::sync::Arc;

use crate::auth::{
    AuthError, AuthType, ChallengeAnswer, ChallengeBody, Identity, SecretKey, SigningKey,
    answer_formats_version, answer_secret, sign_public,
};
use crate::codec::{AuthAnswer, Body, Message, ProtocolVersion, Response};

/// The key an administrator proves their identity with.
#[derive(Debug, Clone)]
pub enum Key {
    /// The private key of an HS_PUBKEY value.
    Public(Arc<SigningKey>),
    /// The secret of an HS_SECKEY value.
    Secret(SecretKey),
}

/// An administrator's identity (`index:handle`) and key.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// Who: the handle and index of the key value (index 0: any of that type).
    pub identity: Identity,
    /// The key.
    pub key: Key,
}

/// Why a challenge could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The message is not a challenge with a request digest.
    #[error("the server's challenge is malformed")]
    NotAChallenge,
    /// Signing or MAC'ing failed.
    #[error("cannot answer the challenge: {0}")]
    Auth(#[from] AuthError),
}

impl Credentials {
    /// The body of the OC_CHALLENGE_RESPONSE (200) answering `challenge`, an
    /// RC_AUTHEN_NEEDED message (whose request digest the caller has checked).
    pub fn answer(&self, challenge: &Message) -> Result<AuthAnswer, AnswerError> {
        let Body::Response {
            digest: Some(digest),
            response: Response::Challenge { nonce },
        } = &challenge.body
        else {
            return Err(AnswerError::NotAChallenge);
        };
        let body = ChallengeBody {
            request_digest: digest.clone(),
            nonce: nonce.clone(),
        };
        let version = answer_formats_version(&challenge.envelope);
        Ok(self.answer_body(&body, version)?.to_wire())
    }

    /// The answer to the challenge `body` in the answer formats of `version`.
    pub fn answer_body(
        &self,
        body: &ChallengeBody,
        version: ProtocolVersion,
    ) -> Result<ChallengeAnswer, AuthError> {
        let (auth_type, answer) = match &self.key {
            Key::Public(key) => (AuthType::PublicKey, sign_public(body, version, key)?),
            Key::Secret(secret) => (AuthType::SecretKey, answer_secret(body, version, secret)?),
        };
        Ok(ChallengeAnswer {
            auth_type,
            key_handle: self.identity.handle.clone(),
            key_index: self.identity.index,
            answer,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::auth::{Challenge, ChallengeId, verify_answer};
    use crate::codec::{Envelope, Header, OpCode, ProtocolVersion, RequestDigest, ResponseCode};
    use crate::values::HandleValue;

    fn challenge_message(challenge: &Challenge) -> Message {
        let header = Header {
            response_code: ResponseCode::AuthenticationNeeded,
            ..Header::request(OpCode::CreateHandle, 0)
        };
        let body = Body::Response {
            digest: Some(challenge.body.request_digest.clone()),
            response: Response::Challenge {
                nonce: challenge.body.nonce.clone(),
            },
        };
        Message::new(Envelope::new(challenge.version, 1), header, body)
    }

    #[test]
    fn secret_key_answers_verify_on_the_server_side() {
        let version = ProtocolVersion::MAX_SUPPORTED;
        let digest = RequestDigest::for_version(version, b"create");
        let challenge = Challenge::new(ChallengeId(4), digest, version, Instant::now()).unwrap();
        let credentials = Credentials {
            identity: Identity {
                handle: "0.NA/TEST".into(),
                index: 300,
            },
            key: Key::Secret(SecretKey(b"s3cret".to_vec())),
        };
        let wire = credentials.answer(&challenge_message(&challenge)).unwrap();
        let answer = ChallengeAnswer::from_wire(wire).unwrap();
        let stored = [HandleValue::new(300, "HS_SECKEY", "s3cret")];
        let identity = verify_answer(&challenge, &answer, &stored).unwrap();
        assert_eq!(identity, credentials.identity);
        let mut not_a_challenge = challenge_message(&challenge);
        not_a_challenge.body = Body::Response {
            digest: None,
            response: Response::Done,
        };
        assert!(matches!(
            credentials.answer(&not_a_challenge),
            Err(AnswerError::NotAChallenge)
        ));
    }
}
