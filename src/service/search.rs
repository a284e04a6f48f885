//! Reverse lookup on this node's store: [`Service::search`], behind
//! [`Handler::search_handles`](super::Handler::search_handles).
//!
//! The store's value index finds the candidates (module `value_index` of
//! [`crate::storage`]); this module decides who sees them. Searching is listing: the
//! caller needs `LIST_HANDLES` on the prefix searched (checked once, refused as the
//! listing is), or, for a search of every prefix, each hit's prefix is checked (once
//! per prefix per call) and the hits under prefixes the caller may not list are left
//! out. A value that is not public counts only for a caller allowed `READ_VALUE` on its
//! handle, so nobody learns by searching what they could not read. Hits of slots the
//! store does not answer reads for (moving in) are left to their owner. Reads run on
//! the blocking pool, one page at a time, pages read until `limit` hits are kept or
//! the index range ends.

use std::collections::HashMap;
use std::sync::Arc;

use crate::names::{Handle, fold_key};
use crate::storage::{Found, HitAccess, ReadSnapshot, SearchHit, SearchPosition};
use crate::values::{HandleValue, SearchQuery};

use super::records::held_here;
use super::{Caller, Error, Service, authorise};

/// One page of candidates read from the store.
struct Page {
    /// The hits whose slots the store answers for.
    hits: Vec<SearchHit>,
    /// Where the next page starts.
    last: Option<SearchPosition>,
    /// Whether the store had `limit` hits: more may follow.
    full: bool,
}

impl Service {
    /// Up to `limit` handles matching `query` after `after`, in index order, that
    /// `caller` may find (see the module docs).
    pub(super) async fn search(
        &self,
        caller: &Caller,
        query: &SearchQuery,
        after: Option<&SearchPosition>,
        limit: usize,
    ) -> Result<Vec<Found>, Error> {
        if caller.is_anonymous() {
            return Err(Error::AuthenticationNeeded);
        }
        if let Some(prefix) = &query.prefix {
            self.authorised(|records| authorise::listing(&self.policy, records, caller, prefix))
                .await?;
        }
        let mut listable: HashMap<String, bool> = HashMap::new();
        let mut found = Vec::new();
        let mut after = after.cloned();
        while found.len() < limit {
            let page = self.read_page(query, after, limit).await?;
            for hit in page.hits {
                if found.len() >= limit {
                    break;
                }
                if self.shows(caller, query, &hit, &mut listable).await? {
                    found.push(hit.found);
                }
            }
            if !page.full {
                break;
            }
            after = page.last;
        }
        Ok(found)
    }

    /// The next page of candidates after `after`, read on the blocking pool.
    async fn read_page(
        &self,
        query: &SearchQuery,
        after: Option<SearchPosition>,
        limit: usize,
    ) -> Result<Page, Error> {
        let store = Arc::clone(&self.store);
        let query = query.clone();
        let reading = tokio::task::spawn_blocking(move || {
            read_page(&*store.read()?, &query, after.as_ref(), limit)
        });
        reading.await.map_err(|_panicked| Error::Busy)?
    }

    /// Whether `caller` finds `hit`: it may list its prefix (checked here for a search
    /// of every prefix, memoised in `listable`) and the hit stands where its reading
    /// of the handle's values puts it.
    async fn shows(
        &self,
        caller: &Caller,
        query: &SearchQuery,
        hit: &SearchHit,
        listable: &mut HashMap<String, bool>,
    ) -> Result<bool, Error> {
        if query.prefix.is_none() {
            let handle = Handle::parse(&hit.found.handle).map_err(Error::InvalidHandle)?;
            let prefix = handle.prefix();
            let key = fold_key(prefix);
            let may_list = match listable.get(&key) {
                Some(&decided) => decided,
                None => {
                    let check = self
                        .authorised(|records| {
                            authorise::listing(&self.policy, records, caller, prefix)
                        })
                        .await;
                    let decided = allowed(check)?;
                    listable.insert(key, decided);
                    decided
                }
            };
            if !may_list {
                return Ok(false);
            }
        }
        Ok(match &hit.access {
            HitAccess::Public => true,
            HitAccess::IfReadable(values) => self.may_read(caller, values).await?,
            HitAccess::UnlessReadable(values) => !self.may_read(caller, values).await?,
        })
    }

    /// Whether `caller` may read the values of a handle holding `values` that are not
    /// public (READ_VALUE).
    async fn may_read(&self, caller: &Caller, values: &[HandleValue]) -> Result<bool, Error> {
        let check = self
            .authorised(|records| authorise::reading_values(&self.policy, records, caller, values))
            .await;
        allowed(check)
    }
}

/// Up to `limit` candidates of `query` after `after` in `read`, those of slots it does
/// not answer for left out.
fn read_page(
    read: &ReadSnapshot,
    query: &SearchQuery,
    after: Option<&SearchPosition>,
    limit: usize,
) -> Result<Page, Error> {
    let types = read.indexed_types()?;
    let plan = types.plan(query).ok_or_else(|| Error::NotIndexed {
        indexed: types.names(),
    })?;
    let hits = read.search(&plan, after, limit)?;
    let full = hits.len() >= limit;
    let last = hits.last().map(|hit| hit.found.position.clone());
    let mut answered = Vec::with_capacity(hits.len());
    for hit in hits {
        let handle = Handle::parse(&hit.found.handle).map_err(Error::InvalidHandle)?;
        if held_here(read, &handle).is_ok() {
            answered.push(hit);
        }
    }
    Ok(Page {
        hits: answered,
        last,
        full,
    })
}

/// A permission check's outcome as a yes or no; any failure other than a refusal (or a
/// prefix handle that cannot exist) is the search's.
fn allowed<T>(outcome: Result<T, Error>) -> Result<bool, Error> {
    match outcome {
        Ok(_) => Ok(true),
        Err(Error::NotPermitted(_) | Error::HandleNotFound) => Ok(false),
        Err(error) => Err(error),
    }
}
