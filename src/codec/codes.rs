//! Operation codes and response codes (digest §3.1, §4; RFC 3652 §2.2.2.1–2.2.2.2).
//!
//! Owns [`OpCode`] and [`ResponseCode`]. Pure; depends on nothing else in the crate
//! but [`super::version`].
//!
//! Response codes follow the J9 column of the digest: the RFC-only codes 900–902 do
//! not exist here, so they can never be sent (J9 clients throw on them), and codes
//! 502–504 carry their J9 meanings. Before protocol 2.5 two codes travel under other
//! numbers ([`ResponseCode::to_wire`], [`ResponseCode::from_wire`]).

use super::version::ProtocolVersion;

/// What a message asks for; a response carries the OpCode of the request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpCode {
    /// 0: used in error replies to undecodable requests.
    Reserved,
    /// 1: resolve a handle.
    Resolution,
    /// 2: get the responding server's HS_SITE.
    GetSiteInfo,
    /// 100: create a handle.
    CreateHandle,
    /// 101: delete a handle.
    DeleteHandle,
    /// 102: add values to a handle.
    AddValue,
    /// 103: remove values from a handle.
    RemoveValue,
    /// 104: replace values of a handle.
    ModifyValue,
    /// 105: list the handles under a prefix.
    ListHandles,
    /// 106: list derived prefixes (never implemented by J9).
    ListNas,
    /// 200: answer to an authentication challenge.
    ChallengeResponse,
    /// 201: ask a server to verify a secret-key answer.
    VerifyResponse,
    /// 300: make a server responsible for a prefix (CNRI).
    HomeNa,
    /// 301: stop a server being responsible for a prefix (CNRI).
    UnhomeNa,
    /// 302: list the prefixes homed at a server (CNRI).
    ListHomedNas,
    /// 400: set up a session.
    SessionSetup,
    /// 401: end a session.
    SessionTerminate,
    /// 402: exchange a session key.
    SessionExchangeKey,
    /// 1000: replication, next transaction id (CNRI).
    GetNextTxnId,
    /// 1001: replication, transaction log (CNRI).
    RetrieveTxnLog,
    /// 1002: replication, dump every handle (CNRI).
    DumpHandles,
    /// 1003: maintenance, back up the server (CNRI).
    BackupServer,
    /// Any other value, kept as sent. Never holds the value of a named code.
    Unknown(u32),
}

/// Every named OpCode with its wire value.
const OP_CODES: [(OpCode, u32); 22] = [
    (OpCode::Reserved, 0),
    (OpCode::Resolution, 1),
    (OpCode::GetSiteInfo, 2),
    (OpCode::CreateHandle, 100),
    (OpCode::DeleteHandle, 101),
    (OpCode::AddValue, 102),
    (OpCode::RemoveValue, 103),
    (OpCode::ModifyValue, 104),
    (OpCode::ListHandles, 105),
    (OpCode::ListNas, 106),
    (OpCode::ChallengeResponse, 200),
    (OpCode::VerifyResponse, 201),
    (OpCode::HomeNa, 300),
    (OpCode::UnhomeNa, 301),
    (OpCode::ListHomedNas, 302),
    (OpCode::SessionSetup, 400),
    (OpCode::SessionTerminate, 401),
    (OpCode::SessionExchangeKey, 402),
    (OpCode::GetNextTxnId, 1000),
    (OpCode::RetrieveTxnLog, 1001),
    (OpCode::DumpHandles, 1002),
    (OpCode::BackupServer, 1003),
];

impl OpCode {
    /// The OpCode for a wire value; unnamed values become [`OpCode::Unknown`].
    pub fn from_u32(value: u32) -> Self {
        OP_CODES
            .iter()
            .find(|(_, wire)| *wire == value)
            .map_or(OpCode::Unknown(value), |(code, _)| *code)
    }

    /// The wire value.
    pub fn to_u32(self) -> u32 {
        match self {
            OpCode::Unknown(value) => value,
            named => OP_CODES
                .iter()
                .find(|(code, _)| *code == named)
                .map_or(0, |(_, wire)| *wire),
        }
    }
    /// Its name in metrics labels: one per named code, `unknown` for every other
    /// value, so that no sender can grow the label set.
    pub fn label(self) -> &'static str {
        match self {
            OpCode::Reserved => "reserved",
            OpCode::Resolution => "resolution",
            OpCode::GetSiteInfo => "getsiteinfo",
            OpCode::CreateHandle => "createhandle",
            OpCode::DeleteHandle => "deletehandle",
            OpCode::AddValue => "addvalue",
            OpCode::RemoveValue => "removevalue",
            OpCode::ModifyValue => "modifyvalue",
            OpCode::ListHandles => "listhandles",
            OpCode::ListNas => "listnas",
            OpCode::ChallengeResponse => "challengeresponse",
            OpCode::VerifyResponse => "verifyresponse",
            OpCode::HomeNa => "homena",
            OpCode::UnhomeNa => "unhomena",
            OpCode::ListHomedNas => "listhomednas",
            OpCode::SessionSetup => "sessionsetup",
            OpCode::SessionTerminate => "sessionterminate",
            OpCode::SessionExchangeKey => "sessionexchangekey",
            OpCode::GetNextTxnId => "getnexttxnid",
            OpCode::RetrieveTxnLog => "retrievetxnlog",
            OpCode::DumpHandles => "dumphandles",
            OpCode::BackupServer => "backupserver",
            OpCode::Unknown(_) => "unknown",
        }
    }
}

/// The outcome a response reports; [`ResponseCode::Reserved`] (0) marks a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResponseCode {
    /// 0: every request.
    Reserved,
    /// 1: success.
    Success,
    /// 2: general error.
    Error,
    /// 3: the server is too busy.
    ServerTooBusy,
    /// 4: the request could not be decoded.
    ProtocolError,
    /// 5: the operation is not supported.
    OperationNotSupported,
    /// 6: too many referrals or forwards.
    RecursionCountTooHigh,
    /// 7: resolution only, the server is under maintenance (CNRI; 303 before 2.5).
    ServerBackup,
    /// 100: no such handle.
    HandleNotFound,
    /// 101: the handle exists already.
    HandleAlreadyExists,
    /// 102: the handle is malformed.
    InvalidHandle,
    /// 200: no value matched.
    ValuesNotFound,
    /// 201: a value with that index exists already.
    ValueAlreadyExists,
    /// 202: a value is malformed (201 before 2.5).
    InvalidValue,
    /// 300: the client's site information is out of date.
    OutOfDateSiteInfo,
    /// 301: this server is not responsible (wrong hash, prefix not homed, not primary).
    ServerNotResponsible,
    /// 302: ask the service named in the body.
    ServiceReferral,
    /// 303: ask the prefix's own service (CNRI ≥ 2.5; RFC 3652's RC_NA_DELEGATE).
    PrefixReferral,
    /// 400: not an administrator for this operation.
    InvalidAdmin,
    /// 401: insufficient permissions.
    InsufficientPermissions,
    /// 402: authenticate first (a challenge).
    AuthenticationNeeded,
    /// 403: authentication failed.
    AuthenticationFailed,
    /// 404: the credential is invalid.
    InvalidCredential,
    /// 405: the challenge is unknown or has expired.
    AuthenticationTimeout,
    /// 406: authentication could not be carried out.
    AuthenticationError,
    /// 500: the session has expired.
    SessionTimeout,
    /// 501: the session failed.
    SessionFailed,
    /// 502: the session key is invalid (J9 meaning).
    InvalidSessionKey,
    /// 503: an RSA key is needed for the session key exchange (J9 meaning).
    NeedRsaKeyForSessionExchange,
    /// 504: the session setup request is invalid (J9 meaning).
    InvalidSessionSetupRequest,
    /// 505: a session message was replayed or out of order (CNRI).
    SessionMessageRejected,
}

/// Every response code with its wire value from protocol 2.5 on.
const RESPONSE_CODES: [(ResponseCode, u32); 31] = [
    (ResponseCode::Reserved, 0),
    (ResponseCode::Success, 1),
    (ResponseCode::Error, 2),
    (ResponseCode::ServerTooBusy, 3),
    (ResponseCode::ProtocolError, 4),
    (ResponseCode::OperationNotSupported, 5),
    (ResponseCode::RecursionCountTooHigh, 6),
    (ResponseCode::ServerBackup, 7),
    (ResponseCode::HandleNotFound, 100),
    (ResponseCode::HandleAlreadyExists, 101),
    (ResponseCode::InvalidHandle, 102),
    (ResponseCode::ValuesNotFound, 200),
    (ResponseCode::ValueAlreadyExists, 201),
    (ResponseCode::InvalidValue, 202),
    (ResponseCode::OutOfDateSiteInfo, 300),
    (ResponseCode::ServerNotResponsible, 301),
    (ResponseCode::ServiceReferral, 302),
    (ResponseCode::PrefixReferral, 303),
    (ResponseCode::InvalidAdmin, 400),
    (ResponseCode::InsufficientPermissions, 401),
    (ResponseCode::AuthenticationNeeded, 402),
    (ResponseCode::AuthenticationFailed, 403),
    (ResponseCode::InvalidCredential, 404),
    (ResponseCode::AuthenticationTimeout, 405),
    (ResponseCode::AuthenticationError, 406),
    (ResponseCode::SessionTimeout, 500),
    (ResponseCode::SessionFailed, 501),
    (ResponseCode::InvalidSessionKey, 502),
    (ResponseCode::NeedRsaKeyForSessionExchange, 503),
    (ResponseCode::InvalidSessionSetupRequest, 504),
    (ResponseCode::SessionMessageRejected, 505),
];

impl ResponseCode {
    /// The code for its (2.5 and later) wire value; `None` for codes J9 does not know.
    pub fn from_u32(value: u32) -> Option<Self> {
        RESPONSE_CODES
            .iter()
            .find(|(_, wire)| *wire == value)
            .map(|(code, _)| *code)
    }

    /// The (2.5 and later) wire value.
    pub fn to_u32(self) -> u32 {
        RESPONSE_CODES
            .iter()
            .find(|(code, _)| *code == self)
            .map_or(0, |(_, wire)| *wire)
    }

    /// The wire value in a message of `version`: before 2.5, J9 sends
    /// [`ResponseCode::ServerBackup`] as 303 and [`ResponseCode::InvalidValue`] as 201.
    pub fn to_wire(self, version: ProtocolVersion) -> u32 {
        match self {
            ResponseCode::ServerBackup if version < ProtocolVersion::V2_5 => 303,
            ResponseCode::InvalidValue if version < ProtocolVersion::V2_5 => 201,
            code => code.to_u32(),
        }
    }

    /// The code for a wire value in a message of `version` (303 means
    /// [`ResponseCode::ServerBackup`] before 2.5); `None` for unknown codes.
    pub fn from_wire(value: u32, version: ProtocolVersion) -> Option<Self> {
        match ResponseCode::from_u32(value)? {
            ResponseCode::PrefixReferral if version < ProtocolVersion::V2_5 => {
                Some(ResponseCode::ServerBackup)
            }
            code => Some(code),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2_4: ProtocolVersion = ProtocolVersion::new(2, 4);
    const V2_11: ProtocolVersion = ProtocolVersion::MAX_SUPPORTED;

    #[test]
    fn every_named_op_code_round_trips() {
        for (code, wire) in OP_CODES {
            assert_eq!(OpCode::from_u32(wire), code);
            assert_eq!(code.to_u32(), wire);
        }
        assert_eq!(OpCode::from_u32(7), OpCode::Unknown(7));
        assert_eq!(OpCode::Unknown(7).to_u32(), 7);
    }

    #[test]
    fn every_response_code_round_trips() {
        for (code, wire) in RESPONSE_CODES {
            assert_eq!(ResponseCode::from_u32(wire), Some(code));
            assert_eq!(
                ResponseCode::from_wire(code.to_wire(V2_11), V2_11),
                Some(code)
            );
        }
    }

    #[test]
    fn rfc_only_codes_are_unknown() {
        for wire in [900, 901, 902, 8, 506, u32::MAX] {
            assert_eq!(ResponseCode::from_u32(wire), None);
        }
    }

    #[test]
    fn pre_2_5_peers_get_the_old_numbers() {
        assert_eq!(ResponseCode::ServerBackup.to_wire(V2_4), 303);
        assert_eq!(ResponseCode::InvalidValue.to_wire(V2_4), 201);
        assert_eq!(ResponseCode::PrefixReferral.to_wire(V2_4), 303);
        assert_eq!(ResponseCode::ServerBackup.to_wire(V2_11), 7);
        assert_eq!(
            ResponseCode::from_wire(303, V2_4),
            Some(ResponseCode::ServerBackup)
        );
        assert_eq!(
            ResponseCode::from_wire(303, V2_11),
            Some(ResponseCode::PrefixReferral)
        );
    }
}
