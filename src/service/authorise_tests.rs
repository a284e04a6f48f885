//! Who may change what, on a real store: prefix administrators, handle
//! administrators, groups, the *_ADMIN bits, listing and server administrators.

use super::*;
use crate::auth::AuthzError;
use crate::values::{AdminPermissions, AdminRecord, Permissions, ValueIndex};

fn admin_of(index: u32, handle: &str, permissions: AdminPermissions) -> HandleValue {
    let record = AdminRecord {
        permissions,
        admin_handle: handle.into(),
        admin_index: 300,
        legacy_padding: false,
    };
    HandleValue {
        permissions: Permissions::ADMIN_ONLY,
        ..HandleValue::new(index, "HS_ADMIN", record.encode())
    }
}

fn values_only() -> AdminPermissions {
    AdminPermissions::ADD_VALUE
        .with(AdminPermissions::MODIFY_VALUE)
        .with(AdminPermissions::REMOVE_VALUE)
}

/// `0.NA/10.1000` lets its own 300 create handles; `10.1000/h` lets `10.1000/editor`
/// change plain values and the group `10.1000/group` (holding `10.1000/member`) add.
async fn world() -> (tempfile::TempDir, Service) {
    let (dir, service) = service().await;
    let prefix = vec![admin_of(100, "0.NA/10.1000", AdminPermissions::ADD_HANDLE)];
    create(&service, "0.NA/10.1000", prefix).await.unwrap();
    let group = crate::values::ValueList(vec![crate::values::ValueReference {
        handle: "10.1000/member".into(),
        index: ValueIndex(300),
    }]);
    let group = vec![HandleValue::new(200, "HS_VLIST", group.encode())];
    create(&service, "10.1000/group", group).await.unwrap();
    let mut by_group = admin_of(101, "10.1000/group", AdminPermissions::ADD_VALUE);
    by_group.data = AdminRecord {
        admin_index: 200,
        ..AdminRecord::decode(&by_group.data).unwrap()
    }
    .encode();
    let values = vec![
        admin_of(100, "10.1000/editor", values_only()),
        by_group,
        HandleValue::new(1, "URL", "https://a.example/"),
    ];
    create(&service, "10.1000/h", values).await.unwrap();
    (dir, service)
}

async fn as_caller(
    service: &Service,
    caller: &Caller,
    operation: Operation,
) -> Result<Applied, Error> {
    service.administer(caller, operation).await
}

fn add(value: HandleValue) -> Operation {
    Operation::AddValues {
        handle: handle("10.1000/h"),
        values: vec![value],
        existing: ExistingValue::Refuse,
    }
}

fn new_handle(text: &str) -> Operation {
    Operation::Create {
        handle: handle(text),
        values: vec![HandleValue::new(1, "URL", "https://n.example/")],
        existing: ExistingHandle::Refuse,
    }
}

fn not_an_admin(result: Result<Applied, Error>) -> bool {
    matches!(
        result,
        Err(Error::NotPermitted(AuthzError::NotAnAdmin { .. }))
    )
}

fn lacking(result: Result<Applied, Error>) -> bool {
    matches!(
        result,
        Err(Error::NotPermitted(
            AuthzError::InsufficientPermissions { .. }
        ))
    )
}

async fn value_count(service: &Service) -> usize {
    resolve_all(service).await
}

async fn resolve_all(service: &Service) -> usize {
    let read = service.store.read().unwrap();
    let record = read
        .get(&handle("10.1000/h"), &ValueSelection::all())
        .unwrap();
    record.map_or(0, |record| record.values.len())
}

#[tokio::test]
async fn anonymous_callers_must_authenticate() {
    let (_dir, service) = world().await;
    let anonymous = Caller::anonymous("192.0.2.1".parse().unwrap());
    let delete = Operation::Delete {
        handle: handle("10.1000/h"),
    };
    assert!(matches!(
        as_caller(&service, &anonymous, delete).await,
        Err(Error::AuthenticationNeeded)
    ));
    assert!(matches!(
        service.list_handles(&anonymous, "10.1000", None, 10).await,
        Err(Error::AuthenticationNeeded)
    ));
    assert_eq!(value_count(&service).await, 3);
}

#[tokio::test]
async fn prefix_administrators_create_but_do_not_own_other_handles() {
    let (_dir, service) = world().await;
    let prefix_admin = as_admin("0.NA/10.1000");
    as_caller(&service, &prefix_admin, new_handle("10.1000/new"))
        .await
        .unwrap();
    let stranger = as_admin("10.1000/stranger");
    assert!(not_an_admin(
        as_caller(&service, &stranger, new_handle("10.1000/other")).await
    ));
    let delete = Operation::Delete {
        handle: handle("10.1000/h"),
    };
    assert!(not_an_admin(
        as_caller(&service, &prefix_admin, delete).await
    ));
    assert_eq!(value_count(&service).await, 3);
}

#[tokio::test]
async fn admin_values_need_the_admin_bits() {
    let (_dir, service) = world().await;
    let editor = as_admin("10.1000/editor");
    as_caller(
        &service,
        &editor,
        add(HandleValue::new(2, "EMAIL", "a@example.org")),
    )
    .await
    .unwrap();
    let admin = admin_of(102, "10.1000/editor", AdminPermissions::ALL);
    assert!(lacking(as_caller(&service, &editor, add(admin)).await));
    let remove_admin = Operation::RemoveValues {
        handle: handle("10.1000/h"),
        indexes: vec![ValueIndex(100)],
    };
    assert!(lacking(as_caller(&service, &editor, remove_admin).await));
    let modify = Operation::ModifyValues {
        handle: handle("10.1000/h"),
        values: vec![HandleValue::new(1, "URL", "https://b.example/")],
    };
    as_caller(&service, &editor, modify).await.unwrap();
    assert_eq!(value_count(&service).await, 4);
}

#[tokio::test]
async fn group_members_hold_the_group_permissions_only() {
    let (_dir, service) = world().await;
    let member = as_admin("10.1000/member");
    as_caller(&service, &member, add(HandleValue::new(3, "DESC", "x")))
        .await
        .unwrap();
    let remove = Operation::RemoveValues {
        handle: handle("10.1000/h"),
        indexes: vec![ValueIndex(1)],
    };
    assert!(lacking(as_caller(&service, &member, remove).await));
    assert_eq!(value_count(&service).await, 4);
}

#[tokio::test]
async fn listing_and_homing_need_their_permissions() {
    let (_dir, service) = world().await;
    let prefix_admin = as_admin("0.NA/10.1000");
    assert!(matches!(
        service
            .list_handles(&prefix_admin, "10.1000", None, 10)
            .await,
        Err(Error::NotPermitted(
            AuthzError::InsufficientPermissions { .. }
        ))
    ));
    let listed = service
        .list_handles(&as_admin("0.NA/ADMIN"), "10.1000", None, 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    let home = Operation::HomePrefix {
        prefix: "10.2000".into(),
    };
    assert!(not_an_admin(
        as_caller(&service, &prefix_admin, home.clone()).await
    ));
    as_caller(&service, &as_admin("0.NA/ADMIN"), home)
        .await
        .unwrap();
}
