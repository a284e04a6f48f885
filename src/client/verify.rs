//! Asking a service whether a secret-key answer is right (OC_VERIFY_RESPONSE 201,
//! digest §3.7, §8.1 step 4): what a server does when an administrator's HS_SECKEY is
//! held by another service.

use super::{Client, ClientError, Transport, unexpected};
use crate::codec::{OpFlags, Request, Response, VerifyRequest};

impl Client {
    /// Whether the service holding `request.key_handle` finds `request.answer` to be a
    /// right answer to the challenge it names. Sent over TCP.
    pub async fn verify_answer(&self, request: VerifyRequest) -> Result<bool, ClientError> {
        let request = Request::VerifyResponse(request);
        match self
            .ask(&request, OpFlags::J9_DEFAULT, Transport::Tcp)
            .await?
        {
            Response::Verification { valid } => Ok(valid),
            other => Err(unexpected("verify-response", &other)),
        }
    }
}
