//! A [`Handler`] in memory, for the edges' unit tests: no Raft node, no redb.
//!
//! Handles live in a `Mutex<BTreeMap>` keyed by folded handle; operations are
//! prepared (validated, timestamped) as the service prepares them and applied at
//! once. One administrator, [`MemoryHandler::admin`], may do everything; its key is
//! the HS_SECKEY [`MemoryHandler::SECRET`], checked by the real, pure answer and
//! secret verification of [`crate::auth`], so challenge-response and sessions work as
//! against a node. Nobody else administers anything.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::auth::{
    AuthzError, Challenge, ChallengeAnswer, Identity, server_key_exchange, verify_answer,
};
use crate::clock::unix_now;
use crate::codec::{KeyExchange, ProtocolVersion, VerifyRequest};
use crate::names::{Handle, fold_key};
use crate::storage::{IndexedTypes, Visibility};
use crate::values::{
    HandleValue, HashOption, Interface, InterfaceKind, InterfaceProtocol, Permissions, SearchQuery,
    ServerRecord, SiteFlags, SiteInfo, ValueSelection,
};

use super::keys::{other_server_answer, secret_identity};
use super::{
    Applied, Caller, ClientRequest, Error, ExistingHandle, ExistingValue, Found, Freshness,
    HandleRecord, Handler, KeyAgreement, Missing, Operation, PrefixRecord, PrivateRead, Refusal,
    Role, SearchPosition, Status, StatusMember, private_read_of, public_only,
};

/// Handles and prefixes in memory, answering as a node would.
#[derive(Debug)]
pub struct MemoryHandler {
    state: Mutex<State>,
    site: SiteInfo,
    status: Status,
}

#[derive(Debug, Default)]
struct State {
    handles: BTreeMap<String, HandleRecord>,
    homed: BTreeSet<String>,
}

impl MemoryHandler {
    /// The administrator's secret (HS_SECKEY at index 300 of `0.NA/ADMIN`).
    pub const SECRET: &'static [u8] = b"s3cret";

    /// A handler holding only the administrator's key handle, describing itself with
    /// `site` and `status`.
    pub fn new(site: SiteInfo, status: Status) -> Self {
        let handler = MemoryHandler {
            state: Mutex::default(),
            site,
            status,
        };
        handler.insert("0.NA/ADMIN", vec![Self::key_value()]);
        handler
    }

    /// A handler describing a one-member replica set: node 1, the primary, at
    /// 192.0.2.1 (Handle protocol 2641, peer 2651, HTTP 8000), site serial 42.
    pub fn example() -> Self {
        let address = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let interface = |kind, protocol| Interface {
            kind,
            protocol,
            port: 2641,
        };
        let site = SiteInfo {
            data_format_version: SiteInfo::DATA_FORMAT_VERSION,
            protocol_major: 2,
            protocol_minor: 11,
            serial_number: 42,
            flags: SiteFlags::PRIMARY,
            hash_option: HashOption::ByHandle,
            hash_filter: String::new(),
            attributes: vec![("desc".into(), "in memory".into())],
            servers: vec![ServerRecord {
                server_id: 1,
                address,
                public_key: Vec::new(),
                interfaces: vec![
                    interface(InterfaceKind::AdminQuery, InterfaceProtocol::Tcp),
                    interface(InterfaceKind::Query, InterfaceProtocol::Udp),
                ],
            }],
        };
        let status = Status {
            role: Role::Primary,
            primary: Some(1),
            applied: Some(7),
            last_log: Some(9),
            term: 3,
            lag: Vec::new(),
            snapshots_installed: 0,
            snapshot_octets_installed: 0,
            members: vec![StatusMember {
                id: 1,
                voter: true,
                handle: SocketAddr::new(address, 2641),
                peer: SocketAddr::new(address, 2651),
                http: Some(SocketAddr::new(address, 8000)),
            }],
        };
        MemoryHandler::new(site, status)
    }

    /// The one administrator: `300:0.NA/ADMIN`.
    pub fn admin() -> Identity {
        Identity {
            handle: "0.NA/ADMIN".into(),
            index: 300,
        }
    }

    /// The administrator's key value.
    fn key_value() -> HandleValue {
        HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..HandleValue::new(300, "HS_SECKEY", Self::SECRET)
        }
    }

    /// Puts `handle` with `values` in place, unchecked (test set-up).
    pub fn insert(&self, handle: &str, values: Vec<HandleValue>) {
        let handle = Handle::parse(handle).expect("a test handle");
        let record = HandleRecord {
            display: handle.as_str().to_owned(),
            values,
        };
        self.state().handles.insert(handle.key().to_owned(), record);
    }

    /// The record of `handle`, every value included, if it exists.
    pub fn get(&self, handle: &str) -> Option<HandleRecord> {
        self.state().handles.get(&fold_key(handle)).cloned()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The selected values of `handle`, every one, or `None`.
    fn read(&self, handle: &Handle, selection: &ValueSelection) -> Option<HandleRecord> {
        let mut record = self.state().handles.get(handle.key())?.clone();
        record.values.retain(|value| selection.matches(value));
        Some(record)
    }

    /// Only the administrator passes; anyone else authenticated is not an admin.
    fn authorise(caller: &Caller) -> Result<(), Error> {
        match caller {
            Caller::Anonymous { .. } => Err(Error::AuthenticationNeeded),
            Caller::Administrator { identity } if *identity == Self::admin() => Ok(()),
            Caller::Administrator { identity } => {
                Err(Error::NotPermitted(AuthzError::NotAnAdmin {
                    handle: identity.handle.clone(),
                    index: identity.index,
                }))
            }
        }
    }

    /// The administrator's key values when `key_handle` is its handle.
    fn key_values(key_handle: &str) -> Result<Vec<HandleValue>, Error> {
        if fold_key(key_handle) == fold_key(&Self::admin().handle) {
            Ok(vec![Self::key_value()])
        } else {
            Err(Error::KeyNotHeld {
                handle: key_handle.to_owned(),
            })
        }
    }
}

impl State {
    /// Applies a prepared, authorised `operation`, as the store does.
    fn apply(&mut self, operation: Operation) -> Result<Applied, Refusal> {
        match operation {
            Operation::Create {
                handle,
                values,
                existing,
            } => {
                let exists = self.handles.contains_key(handle.key());
                let applied = match (exists, existing) {
                    (true, ExistingHandle::Refuse) => return Err(Refusal::HandleExists),
                    (true, ExistingHandle::Overwrite) => Applied::Replaced,
                    (false, _) => Applied::Created,
                };
                let display = handle.as_str().to_owned();
                let record = self.handles.entry(handle.key().to_owned());
                let record = record.or_insert(HandleRecord {
                    display,
                    values: Vec::new(),
                });
                record.values = values;
                Ok(applied)
            }
            Operation::Delete { handle } => match self.handles.remove(handle.key()) {
                Some(_) => Ok(Applied::Done),
                None => Err(Refusal::HandleNotFound),
            },
            Operation::AddValues {
                handle,
                values,
                existing,
            } => self.change(&handle, |record| {
                for value in values {
                    match (find(record, value.index.0), existing) {
                        (None, _) => record.values.push(value),
                        (Some(at), ExistingValue::Replace) => record.values[at] = value,
                        (Some(_), ExistingValue::Refuse) => {
                            return Err(Refusal::ValueExists(value.index));
                        }
                    }
                }
                Ok(())
            }),
            Operation::ModifyValues { handle, values } => self.change(&handle, |record| {
                for value in values {
                    let at =
                        find(record, value.index.0).ok_or(Refusal::ValueNotFound(value.index))?;
                    record.values[at] = value;
                }
                Ok(())
            }),
            Operation::RemoveValues { handle, indexes } => self.change(&handle, |record| {
                if let Some(missing) = indexes.iter().find(|i| find(record, i.0).is_none()) {
                    return Err(Refusal::ValueNotFound(*missing));
                }
                record
                    .values
                    .retain(|value| !indexes.contains(&value.index));
                Ok(())
            }),
            Operation::HomePrefix { prefix } => {
                self.homed.insert(prefix);
                Ok(Applied::Done)
            }
            Operation::UnhomePrefix { prefix } => {
                self.homed.remove(&prefix);
                Ok(Applied::Done)
            }
        }
    }

    /// Changes the record of `handle` with `change`, all or nothing.
    fn change(
        &mut self,
        handle: &Handle,
        change: impl FnOnce(&mut HandleRecord) -> Result<(), Refusal>,
    ) -> Result<Applied, Refusal> {
        let record = self
            .handles
            .get(handle.key())
            .ok_or(Refusal::HandleNotFound)?;
        let mut changed = record.clone();
        change(&mut changed)?;
        self.handles.insert(handle.key().to_owned(), changed);
        Ok(Applied::Done)
    }

    /// The display spellings of the handles under `prefix`, in key order.
    fn under<'a>(&'a self, prefix: &str) -> impl Iterator<Item = (&'a String, &'a str)> {
        let start = format!("{}/", fold_key(prefix));
        self.handles
            .range(start.clone()..)
            .take_while(move |(key, _)| key.starts_with(&start))
            .map(|(key, record)| (key, record.display.as_str()))
    }
}

fn find(record: &HandleRecord, index: u32) -> Option<usize> {
    record
        .values
        .iter()
        .position(|value| value.index.0 == index)
}

#[async_trait]
impl Handler for MemoryHandler {
    async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        _freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        public_only(self.read(handle, selection).ok_or(Error::HandleNotFound)?)
    }

    /// The handles here are one service's, every prefix answered here and none
    /// templated: not found is the answer.
    async fn missing(
        &self,
        _handle: &Handle,
        _selection: &ValueSelection,
    ) -> Result<Missing, Error> {
        Ok(Missing::NotFound)
    }

    async fn private_read(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<PrivateRead, Error> {
        private_read_of(self.read(handle, selection).as_ref())
    }

    async fn resolve_all(
        &self,
        caller: &Caller,
        handle: &Handle,
        selection: &ValueSelection,
        _freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        Self::authorise(caller)?;
        let record = self.read(handle, selection).ok_or(Error::HandleNotFound)?;
        if record.values.is_empty() {
            return Err(Error::ValuesNotFound);
        }
        Ok(record)
    }

    async fn administer(&self, caller: &Caller, operation: Operation) -> Result<Applied, Error> {
        Self::authorise(caller)?;
        let operation = operation.prepare(unix_now())?;
        Ok(self.state().apply(operation)?)
    }

    /// Applied at once, as [`Handler::administer`]: nothing here answers later than
    /// it applies, so there is no write a client could send again unanswered.
    async fn administer_request(
        &self,
        caller: &Caller,
        operation: Operation,
        _request: ClientRequest,
    ) -> Result<Applied, Error> {
        self.administer(caller, operation).await
    }

    async fn mint(
        &self,
        caller: &Caller,
        base: &str,
        values: Vec<HandleValue>,
    ) -> Result<(Handle, Applied), Error> {
        let separator = if base.contains('/') { "" } else { "/" };
        let handle = Handle::parse(&format!("{base}{separator}{}", rand::random::<u64>()))
            .map_err(Error::InvalidHandle)?;
        let operation = Operation::Create {
            handle: handle.clone(),
            values,
            existing: ExistingHandle::Refuse,
        };
        let applied = self.administer(caller, operation).await?;
        Ok((handle, applied))
    }

    async fn count_handles(&self, caller: &Caller, prefix: &str) -> Result<u64, Error> {
        Self::authorise(caller)?;
        Ok(self.state().under(prefix).count() as u64)
    }

    async fn list_handles(
        &self,
        caller: &Caller,
        prefix: &str,
        after: Option<&Handle>,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        Self::authorise(caller)?;
        let state = self.state();
        let after = after.map(Handle::key);
        Ok(state
            .under(prefix)
            .filter(|(key, _)| after.is_none_or(|after| key.as_str() > after))
            .take(limit)
            .map(|(_, display)| display.to_owned())
            .collect())
    }

    /// Every handle is read for the default indexed types (URL, EMAIL), in the
    /// order of a store's index; the administrator reads every value.
    async fn search_handles(
        &self,
        caller: &Caller,
        query: &SearchQuery,
        after: Option<&SearchPosition>,
        limit: usize,
    ) -> Result<Vec<Found>, Error> {
        Self::authorise(caller)?;
        let types = IndexedTypes::default();
        let plan = types.plan(query).ok_or_else(|| Error::NotIndexed {
            indexed: types.names(),
        })?;
        let state = self.state();
        let mut found: Vec<Found> = state
            .handles
            .iter()
            .filter(|(key, _)| plan.covers(key))
            .filter_map(|(key, record)| {
                let data = plan.first_match(&record.values, Visibility::All)?;
                let position = SearchPosition {
                    data: data.to_vec(),
                    key: key.clone(),
                };
                let handle = record.display.clone();
                Some(Found { position, handle })
            })
            .filter(|found| after.is_none_or(|after| found.position > *after))
            .collect();
        found.sort_by(|a, b| a.position.cmp(&b.position));
        found.truncate(limit);
        Ok(found)
    }

    async fn list_prefixes(&self, caller: &Caller) -> Result<Vec<PrefixRecord>, Error> {
        Self::authorise(caller)?;
        let state = self.state();
        let mut prefixes: BTreeMap<String, PrefixRecord> = BTreeMap::new();
        for record in state.handles.values() {
            let prefix = record.display.split_once('/').map_or("", |(p, _)| p);
            let entry = prefixes.entry(fold_key(prefix)).or_insert(PrefixRecord {
                display: prefix.to_owned(),
                handle_count: 0,
                homed: false,
            });
            entry.handle_count += 1;
        }
        for prefix in &state.homed {
            let entry = prefixes.entry(fold_key(prefix)).or_insert(PrefixRecord {
                display: prefix.clone(),
                handle_count: 0,
                homed: true,
            });
            entry.homed = true;
        }
        Ok(prefixes.into_values().collect())
    }

    async fn site_info(&self) -> SiteInfo {
        self.site.clone()
    }

    fn status(&self) -> Status {
        self.status.clone()
    }

    async fn verify_answer(
        &self,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
    ) -> Result<Identity, Error> {
        let values = Self::key_values(&answer.key_handle)?;
        verify_answer(challenge, answer, &values).map_err(Error::Authentication)
    }

    async fn verify_secret(&self, identity: &Identity, secret: &[u8]) -> Result<Identity, Error> {
        secret_identity(identity, &Self::key_values(&identity.handle)?, secret)
    }

    async fn verify_for_other_server(
        &self,
        request: &VerifyRequest,
        version: ProtocolVersion,
    ) -> Result<bool, Error> {
        let key_handle = String::from_utf8_lossy(&request.key_handle).into_owned();
        let values = Self::key_values(&key_handle)?;
        let (challenge, answer) = other_server_answer(request, key_handle, version);
        Ok(verify_answer(&challenge, &answer, &values).is_ok())
    }

    async fn key_exchange(&self, exchange: KeyExchange) -> Result<KeyAgreement, Error> {
        Ok(server_key_exchange(&exchange))
    }
}
