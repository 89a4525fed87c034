//! Shared read views for plans and refreshes: one describe or list call serves every
//! concurrent and later reader of the same key until it ages out or this process changes
//! something. Terraform refreshes resources one RPC at a time; without a view, a plan of 200
//! resources makes 200 describes of things a few paginated calls return at once.
//!
//! A view only ever answers "what is there": callers look up anything a view lacks directly,
//! so nothing is reported gone on a view's word alone, and applies and waiters never use one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;

/// How long a view serves readers (a plan reads its resources within seconds).
pub const VIEW_TTL: Duration = Duration::from_secs(30);

struct Taken<T> {
    at: Instant,
    generation: u64,
    value: Arc<T>,
}

type Slot<T> = Arc<tokio::sync::Mutex<Option<Taken<T>>>>;

/// Views by key (a region, a parameter path, a tag key). One slot per key: readers of one key
/// share one read, readers of different keys do not wait for each other.
pub(crate) struct Views<T> {
    slots: Mutex<HashMap<String, Slot<T>>>,
    /// Bumped by every change this process makes; a view taken before it is stale.
    generation: AtomicU64,
    /// How long a view serves: [`VIEW_TTL`] (shorter in tests, which wait it out in real time).
    ttl: Duration,
}

impl<T> Default for Views<T> {
    fn default() -> Self {
        Views {
            slots: Mutex::default(),
            generation: AtomicU64::new(0),
            ttl: VIEW_TTL,
        }
    }
}

impl<T> std::fmt::Debug for Views<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Views")
            .field("generation", &self.generation.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

/// Held while this process changes something (see [`Views::changing`]).
pub(crate) struct Changing<'a, T>(&'a Views<T>);

impl<T> Drop for Changing<'_, T> {
    fn drop(&mut self) {
        self.0.changed();
    }
}

impl<T> Views<T> {
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Marks every view stale now and again when the guard drops, on every way out of the
    /// change: a view read while the change was in flight may hold the old value.
    pub(crate) fn changing(&self) -> Changing<'_, T> {
        self.changed();
        Changing(self)
    }

    /// The view under `key`, read with `load` when there is none, it is older than
    /// [`VIEW_TTL`], or this process changed something since it was taken.
    pub(crate) async fn get<F, Fut>(&self, key: &str, load: F) -> Result<Arc<T>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            slots.entry(key.to_string()).or_default().clone()
        };
        let mut taken = slot.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some(t) = taken.as_ref() {
            if t.generation == generation && t.at.elapsed() < self.ttl {
                return Ok(t.value.clone());
            }
        }
        let at = Instant::now();
        let value = Arc::new(load().await?);
        *taken = Some(Taken {
            at,
            generation,
            value: value.clone(),
        });
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test]
    async fn concurrent_readers_share_one_load_and_a_change_forces_another() {
        let views: Arc<Views<usize>> = Arc::default();
        let loads = Arc::new(AtomicUsize::new(0));
        let read = |views: Arc<Views<usize>>, loads: Arc<AtomicUsize>, key: &'static str| async move {
            views
                .get(key, || async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok(loads.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await
        };
        let readers: Vec<_> = (0..8)
            .map(|_| tokio::spawn(read(views.clone(), loads.clone(), "a")))
            .collect();
        for r in readers {
            assert_eq!(*r.await.expect("reader").expect("view"), 1);
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1, "eight readers, one load");
        // Another key is its own view.
        assert_eq!(*read(views.clone(), loads.clone(), "b").await.expect("view"), 2);
        drop(views.changing());
        assert_eq!(*read(views.clone(), loads.clone(), "a").await.expect("view"), 3);
        assert_eq!(*read(views.clone(), loads.clone(), "a").await.expect("view"), 3);
    }

    #[tokio::test]
    async fn a_view_taken_during_a_change_is_stale_once_the_change_is_over() {
        let views: Views<u32> = Views::default();
        let change = views.changing();
        assert_eq!(*views.get("k", || async { Ok(1) }).await.expect("view"), 1);
        assert_eq!(*views.get("k", || async { Ok(2) }).await.expect("view"), 1);
        drop(change);
        assert_eq!(*views.get("k", || async { Ok(3) }).await.expect("view"), 3);
    }

    #[tokio::test]
    async fn a_failed_load_is_not_remembered() {
        let views: Views<u32> = Views::default();
        let err = views
            .get("k", || async {
                Err(crate::AwsError::new("listing", Some("Throttling"), "slow down"))
            })
            .await;
        assert!(err.is_err());
        assert_eq!(*views.get("k", || async { Ok(7) }).await.expect("view"), 7);
    }

    #[tokio::test]
    async fn a_view_ages_out() {
        let views: Views<u32> = Views {
            ttl: Duration::from_secs(1),
            ..Views::default()
        };
        assert_eq!(*views.get("k", || async { Ok(1) }).await.expect("view"), 1);
        assert_eq!(*views.get("k", || async { Ok(2) }).await.expect("view"), 1);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(*views.get("k", || async { Ok(3) }).await.expect("view"), 3);
    }
}
