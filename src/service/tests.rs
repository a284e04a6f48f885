//! Service rules on a real store in a temporary directory.

use std::sync::Arc;

use super::*;
use crate::auth::Identity;
use crate::clock::unix_now;
use crate::config::SiteConfig;
use crate::names::Handle;
use crate::storage::Store;
use crate::values::ValueSelection;
use crate::values::{AdminPermissions, AdminRecord, Permissions, ValueIndex};

/// The server administrator of the test services.
fn server_admin() -> Identity {
    Identity {
        handle: "0.NA/ADMIN".into(),
        index: 300,
    }
}

/// A caller authenticated as `handle` at index 300.
fn as_admin(handle: &str) -> Caller {
    Caller::Administrator {
        identity: Identity {
            handle: handle.into(),
            index: 300,
        },
    }
}

async fn service() -> (tempfile::TempDir, Service) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("handles.redb")).unwrap());
    let handle = "127.0.0.1:2641".parse().unwrap();
    let replica = crate::replication::start_alone(Arc::clone(&store), dir.path(), handle).await;
    let policy = AuthPolicy {
        server_admins: vec![server_admin()],
    };
    (
        dir,
        Service::new(store, replica, policy, SiteConfig::default()),
    )
}

async fn resolve(
    service: &Service,
    text: &str,
    selection: &ValueSelection,
) -> Result<HandleRecord, Error> {
    service
        .resolve(&handle(text), selection, Freshness::Authoritative)
        .await
}

fn handle(text: &str) -> Handle {
    Handle::parse(text).unwrap()
}

fn admin_value() -> HandleValue {
    let record = AdminRecord {
        permissions: AdminPermissions::ALL,
        admin_handle: "0.NA/10.1000".into(),
        admin_index: 200,
        legacy_padding: false,
    };
    HandleValue {
        permissions: Permissions::DEFAULT,
        ..HandleValue::new(100, "HS_ADMIN", record.encode())
    }
}

async fn create(service: &Service, text: &str, values: Vec<HandleValue>) -> Result<Applied, Error> {
    let operation = Operation::Create {
        handle: handle(text),
        values,
        existing: ExistingHandle::Refuse,
    };
    service.administer(&as_admin("0.NA/ADMIN"), operation).await
}

#[tokio::test]
async fn resolution_returns_what_the_permission_bits_make_public() {
    let (_dir, service) = service().await;
    let private = HandleValue {
        permissions: Permissions::ADMIN_ONLY,
        ..HandleValue::new(3, "DESC", "internal note")
    };
    let values = vec![
        admin_value(),
        HandleValue::new(1, "URL", "https://a.example/"),
        private,
    ];
    create(&service, "10.1000/mixed", values).await.unwrap();
    let record = resolve(&service, "10.1000/MIXED", &ValueSelection::all())
        .await
        .unwrap();
    let mut indexes: Vec<_> = record.values.iter().map(|v| v.index).collect();
    indexes.sort();
    assert_eq!(
        indexes,
        [ValueIndex(1), ValueIndex(100)],
        "an HS_ADMIN with public read too"
    );

    let only_private = ValueSelection {
        indexes: vec![],
        types: vec!["DESC".into()],
    };
    let error = resolve(&service, "10.1000/mixed", &only_private)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::ValuesNotFound), "{error:?}");
    let error = resolve(&service, "10.1000/none", &ValueSelection::all())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::HandleNotFound), "{error:?}");
}

#[tokio::test]
async fn writes_are_validated_and_stamped_by_the_server() {
    let (_dir, service) = service().await;
    let before = unix_now();
    let mut value = HandleValue::new(1, "URL", "https://a.example/");
    value.timestamp = 7;
    create(&service, "10.1000/t", vec![value]).await.unwrap();
    let stored = resolve(&service, "10.1000/t", &ValueSelection::all())
        .await
        .unwrap();
    assert!(stored.values[0].timestamp >= before);

    let error = create(
        &service,
        "10.1000/bad",
        vec![HandleValue::new(1, "HS_ADMIN", "not an admin record")],
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidValue {
                index: ValueIndex(1),
                ..
            }
        ),
        "{error:?}"
    );
    let public_secret = HandleValue::new(300, "HS_SECKEY", "s3cret");
    let error = create(&service, "10.1000/bad", vec![public_secret])
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidValue {
                index: ValueIndex(300),
                ..
            }
        ),
        "{error:?}"
    );
    let error = resolve(&service, "10.1000/bad", &ValueSelection::all())
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::HandleNotFound),
        "nothing was written: {error:?}"
    );
}

#[tokio::test]
async fn refusals_come_back_as_errors() {
    let (_dir, service) = service().await;
    create(
        &service,
        "10.1000/r",
        vec![HandleValue::new(1, "URL", "https://a/")],
    )
    .await
    .unwrap();
    let error = create(
        &service,
        "10.1000/R",
        vec![HandleValue::new(1, "URL", "https://b/")],
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, Error::Refused(Refusal::HandleExists)),
        "{error:?}"
    );
}

#[tokio::test]
async fn administrators_read_every_value_count_and_list_prefixes() {
    let (_dir, service) = service().await;
    let remote = as_admin("10.1000/stranger");
    let admin = as_admin("0.NA/ADMIN");
    let values = vec![
        admin_value(),
        HandleValue::new(1, "URL", "https://a.example/"),
    ];
    create(&service, "10.1000/all", values).await.unwrap();
    let all = service
        .resolve_all(
            &admin,
            &handle("10.1000/all"),
            &ValueSelection::all(),
            Freshness::Local,
        )
        .await
        .unwrap();
    assert_eq!(all.values.len(), 2);
    assert!(matches!(
        service
            .resolve_all(
                &remote,
                &handle("10.1000/all"),
                &ValueSelection::all(),
                Freshness::Local
            )
            .await,
        Err(Error::NotPermitted(_))
    ));
    assert_eq!(service.count_handles(&admin, "10.1000").await.unwrap(), 1);
    assert_eq!(service.count_handles(&admin, "nothing").await.unwrap(), 0);
    let prefixes = service.list_prefixes(&admin).await.unwrap();
    assert_eq!(prefixes.len(), 1);
    assert_eq!(prefixes[0].display, "10.1000");
    assert!(matches!(
        service.list_prefixes(&remote).await,
        Err(Error::NotPermitted(_))
    ));
}

#[path = "authorise_tests.rs"]
mod authorise_tests;

/// An administrator whose HS_ADMIN is taken away while their write is in flight: the
/// write never applies after the change (it was authorised on a record that no longer
/// reads so; checked again, it is refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_never_lands_after_its_author_lost_the_right() {
    let (_dir, service) = service().await;
    let service = Arc::new(service);
    let raced = handle("10.1000/raced");
    let editor = Caller::Administrator {
        identity: Identity {
            handle: "0.NA/10.1000".into(),
            index: 200,
        },
    };
    let url = |text: &str| HandleValue::new(1, "URL", text);
    let put = |values| Operation::Create {
        handle: raced.clone(),
        values,
        existing: ExistingHandle::Overwrite,
    };
    let mut late_writes = Vec::new();
    for round in 0..40 {
        let reset = put(vec![admin_value(), url("reset")]);
        let server = as_admin("0.NA/ADMIN");
        service.administer(&server, reset).await.unwrap();
        let edit = Operation::ModifyValues {
            handle: raced.clone(),
            values: vec![url(&format!("edited-{round}"))],
        };
        let revoke = put(vec![url(&format!("revoked-{round}"))]);
        // The revocation is proposed first; the edit is checked while it is still in
        // flight, so the edit is checked on the old record and lands after it.
        let (revoked, edited) = tokio::join!(
            service.administer(&server, revoke),
            service.administer(&editor, edit)
        );
        revoked.unwrap();
        let now = resolve(&service, "10.1000/raced", &ValueSelection::all())
            .await
            .unwrap();
        let last = String::from_utf8_lossy(&now.values[0].data).into_owned();
        if edited.is_ok() && last == format!("edited-{round}") {
            late_writes.push(round);
        }
    }
    assert!(
        late_writes.is_empty(),
        "edits applied after their author's HS_ADMIN was removed, in rounds {late_writes:?}"
    );
}

#[tokio::test]
async fn a_write_sent_again_under_its_name_is_answered_as_the_first_time() {
    let (_dir, service) = service().await;
    let server = as_admin("0.NA/ADMIN");
    let url = |text: &str| HandleValue::new(1, "URL", text);
    let create = |text: &str| Operation::Create {
        handle: handle("10.1000/named"),
        values: vec![url(text)],
        existing: ExistingHandle::Refuse,
    };
    let named =
        |operation, request| service.administer_request(&server, operation, ClientRequest(request));

    assert_eq!(named(create("first"), 7).await.unwrap(), Applied::Created);
    // The same create under the same name: its first answer, nothing changed.
    assert_eq!(named(create("first"), 7).await.unwrap(), Applied::Created);
    // Under another name, or with other values, it is another request.
    assert!(matches!(
        named(create("first"), 8).await,
        Err(Error::Refused(Refusal::HandleExists))
    ));
    assert!(matches!(
        named(create("second"), 7).await,
        Err(Error::Refused(Refusal::HandleExists))
    ));
    // Another caller's request of the same name is its own.
    let other = as_admin("0.NA/OTHER");
    let by_other = service.administer_request(&other, create("first"), ClientRequest(7));
    assert!(matches!(by_other.await, Err(Error::NotPermitted(_))));

    // A delete sent again answers as the first time, though the handle is gone.
    let delete = || Operation::Delete {
        handle: handle("10.1000/named"),
    };
    assert_eq!(named(delete(), 9).await.unwrap(), Applied::Done);
    assert_eq!(named(delete(), 9).await.unwrap(), Applied::Done);
    assert!(matches!(
        named(delete(), 10).await,
        Err(Error::HandleNotFound)
    ));
    let gone = resolve(&service, "10.1000/named", &ValueSelection::all()).await;
    assert!(matches!(gone, Err(Error::HandleNotFound)));
}

#[path = "missing_tests.rs"]
mod missing_tests;
