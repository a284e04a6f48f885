//! What answers a missing handle, on a store that answers for no slot: every record
//! is read through a [`RecordSource`] that counts the reads, so each test says which
//! records one miss read, and how often.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::*;
use crate::storage::Slot;

/// The records of the other replica sets, and every read of them.
#[derive(Debug, Default)]
struct Elsewhere {
    records: HashMap<String, Vec<HandleValue>>,
    reads: Mutex<Vec<String>>,
}

#[async_trait]
impl RecordSource for Elsewhere {
    async fn values(&self, handle: &Handle) -> Result<Option<Vec<HandleValue>>, Error> {
        self.reads.lock().unwrap().push(handle.as_str().to_owned());
        Ok(self.records.get(handle.as_str()).cloned())
    }
}

/// A template with no base values to copy: a URL from the extension.
const LINKS: &str = r#"<namespace><template delimiter="@">
    <if value="extension" test="equals" expression="gone"><notfound/></if>
    <value type="URL" data="https://b.org/${extension}"/>
  </template></namespace>"#;

const PAGES: &str = r#"<namespace><template delimiter="@">
    <if value="extension" test="equals" expression="gone"><notfound/></if>
    <foreach><value data="${data}?page=${extension}"/></foreach>
  </template></namespace>"#;

/// A service whose store owns no slot of its ring (every record is `elsewhere`'s),
/// answering unserved prefixes as `unserved` says.
async fn service_elsewhere(
    elsewhere: Arc<Elsewhere>,
    unserved: Unserved,
) -> (tempfile::TempDir, Service) {
    let (dir, service) = service().await;
    let batch = service.store.write().unwrap();
    batch.make_slice(4, &[] as &[Slot]).unwrap();
    batch.commit().unwrap();
    let service = service.with_records(elsewhere).with_unserved(unserved);
    (dir, service)
}

fn elsewhere() -> Arc<Elsewhere> {
    let value = |index, kind: &str, data: &str| HandleValue::new(index, kind, data);
    let records = [
        ("0.NA/TPL", vec![value(1, "HS_NAMESPACE", PAGES)]),
        ("TPL/book", vec![value(1, "URL", "https://e.org/book")]),
        ("0.NA/FAR", vec![value(1, "HS_SITE", "site of FAR")]),
        (
            "0.NA/BOTH",
            vec![value(1, "HS_NAMESPACE", LINKS), value(2, "HS_SITE", "site")],
        ),
        ("0.NA/DER", vec![value(1, "HS_SITE.PREFIX", "delegate")]),
    ];
    let records = records
        .into_iter()
        .map(|(handle, values)| (handle.to_owned(), values))
        .collect();
    Arc::new(Elsewhere {
        records,
        reads: Mutex::default(),
    })
}

/// What answers `text`, and the records read to decide it.
async fn missing(service: &Service, elsewhere: &Elsewhere, text: &str) -> (Missing, Vec<String>) {
    elsewhere.reads.lock().unwrap().clear();
    let answer = service
        .missing(&handle(text), &ValueSelection::all())
        .await
        .unwrap();
    (answer, elsewhere.reads.lock().unwrap().clone())
}

#[tokio::test]
async fn a_miss_reads_its_prefix_handle_once_for_template_and_referral() {
    let records = elsewhere();
    let (_dir, service) = service_elsewhere(Arc::clone(&records), Unserved::Refuse).await;

    // Derived: the prefix handle once, then the base.
    let (answer, reads) = missing(&service, &records, "TPL/book@3").await;
    let Missing::Derived(resolved) = answer else {
        panic!("not derived: {answer:?}");
    };
    assert_eq!(resolved.record.values[0].data, b"https://e.org/book?page=3");
    assert_eq!(reads, ["0.NA/TPL", "TPL/book"]);

    // Referred by the prefix handle's HS_SITE: read once.
    let (answer, reads) = missing(&service, &records, "FAR/x").await;
    assert!(
        matches!(&answer, Missing::Referred(Referral::Service { handle, values })
            if handle.as_str() == "0.NA/FAR" && values.len() == 1),
        "{answer:?}"
    );
    assert_eq!(reads, ["0.NA/FAR"]);

    // The template comes first; where it says not found, the referral answers, from
    // the same read.
    let (answer, reads) = missing(&service, &records, "BOTH/x@2").await;
    assert!(matches!(answer, Missing::Derived(_)), "{answer:?}");
    assert_eq!(reads, ["0.NA/BOTH", "BOTH/x"]);
    let (answer, reads) = missing(&service, &records, "BOTH/x@gone").await;
    assert!(
        matches!(answer, Missing::Referred(Referral::Service { .. })),
        "{answer:?}"
    );
    assert_eq!(reads, ["0.NA/BOTH", "BOTH/x"]);

    // No prefix handle: not served here, one read.
    let (answer, reads) = missing(&service, &records, "NOWHERE/x").await;
    assert!(
        matches!(&answer, Missing::NotHomed { prefix } if prefix == "NOWHERE"),
        "{answer:?}"
    );
    assert_eq!(reads, ["0.NA/NOWHERE"]);

    // A missing prefix handle: its ancestors, nearest first, each once; never derived.
    let (answer, reads) = missing(&service, &records, "0.NA/DER.SUB.X").await;
    assert!(
        matches!(answer, Missing::Referred(Referral::Prefix { .. })),
        "{answer:?}"
    );
    assert_eq!(reads, ["0.NA/DER.SUB", "0.NA/DER"]);

    // Under a `0.` authority: nothing is read.
    let (answer, reads) = missing(&service, &records, "0.TEST/x").await;
    assert!(matches!(answer, Missing::NotFound), "{answer:?}");
    assert!(reads.is_empty(), "{reads:?}");
}

#[tokio::test]
async fn an_unserved_prefix_is_not_found_on_a_service_on_its_own() {
    let records = elsewhere();
    let (_dir, service) = service_elsewhere(Arc::clone(&records), Unserved::NotFound).await;
    let (answer, reads) = missing(&service, &records, "NOWHERE/x").await;
    assert!(matches!(answer, Missing::NotFound), "{answer:?}");
    assert_eq!(reads, ["0.NA/NOWHERE"]);
    // A template-derived answer is the same whatever `unserved` says.
    let (answer, _) = missing(&service, &records, "TPL/book@4").await;
    assert!(matches!(answer, Missing::Derived(_)), "{answer:?}");
}
