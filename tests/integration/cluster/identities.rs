//! An identity is known on every member as soon as the set acknowledges it: a
//! secondary that has not applied (or holds uncommitted) the write creating a key
//! handle looks the handle up again after a fresh read rather than refusing the
//! identity as unknown (RC_AUTHEN_ERROR, 406).

use hdl::client::{AdminRequest, Credentials, Key, Overwrite};
use hdl::codec::ResponseCode;
use hdl::names::Handle;
use hdl::values::{AdminPermissions, AdminRecord, HandleValue, Permissions};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;

use super::{Member, Set, administer};
use crate::harness::admin_credentials;

/// The key handle created through the primary, and its secret.
const KEEPER: &str = "test/keeper";
const KEEPER_SECRET: &[u8] = b"the keeper's secret";

/// `KEEPER`: its secret key at index 300, and an HS_ADMIN letting that key add values.
fn keeper_values() -> Vec<HandleValue> {
    let record = AdminRecord {
        permissions: AdminPermissions::ADD_VALUE,
        admin_handle: KEEPER.into(),
        admin_index: 300,
        legacy_padding: false,
    };
    let admin = HandleValue {
        permissions: Permissions::ADMIN_ONLY,
        ..HandleValue::new(100, "HS_ADMIN", record.encode())
    };
    let secret = HandleValue {
        permissions: Permissions::ADMIN_ONLY,
        ..HandleValue::new(300, "HS_SECKEY", KEEPER_SECRET)
    };
    vec![admin, secret]
}

/// SIGSTOP or SIGCONT to `member`.
fn signal(member: &Member, signal: Signal) {
    let child = member.child.as_ref().expect("a running member");
    kill_process(Pid::from_child(child), signal).expect("signal the member");
}

#[test]
fn an_identity_created_through_the_primary_authenticates_at_once_on_a_secondary_that_lags() {
    let set = Set::form(3);
    set.await_status(0, "three caught-up members", |s: &Value| {
        s["members"]
            .as_array()
            .is_some_and(|members| members.len() == 3 && members.iter().all(|m| m["lag"] == 0))
    });
    let primary = set.primary(0);
    let lagging = &set.members[(primary + 1) % 3];

    // The primary and the other secondary acknowledge the identity while this one is
    // stopped; it receives the write only once it runs again.
    signal(lagging, Signal::STOP);
    let create = AdminRequest::Create {
        handle: Handle::parse(KEEPER).expect("handle"),
        values: keeper_values(),
        overwrite: Overwrite::Refuse,
    };
    let created = administer(&set.members[primary], admin_credentials(), create);
    signal(lagging, Signal::CONT);
    assert_eq!(created, ResponseCode::Success);

    let keeper = Credentials {
        identity: hdl::config::parse_identity(&format!("300:{KEEPER}")).expect("identity"),
        key: Key::Secret(hdl::auth::SecretKey(KEEPER_SECRET.to_vec())),
    };
    let add = AdminRequest::AddValues {
        handle: Handle::parse(KEEPER).expect("handle"),
        values: vec![HandleValue::new(1, "URL", "https://example.org/keeper")],
        overwrite: Overwrite::Refuse,
    };
    assert_eq!(
        administer(lagging, keeper, add),
        ResponseCode::Success,
        "the keeper's first request, at node {}",
        lagging.id
    );
}
