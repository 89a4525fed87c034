//! Polling until a resource reaches a state: pending → target, with a timeout, failing
//! fast on failure states, and tolerating a short not-found window after creation.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::{AwsError, Result};

/// What one look at the resource found.
#[derive(Debug)]
pub enum Poll<T> {
    /// Still on its way; the string names the current state for messages.
    Pending(String),
    Done(T),
}

/// Poll intervals: start quick (most transitions are short), back off to `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(500),
            max: Duration::from_secs(15),
        }
    }
}

/// Calls `check` until it returns Done, an error, or `timeout` passes.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, backoff: Backoff, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Poll<T>>>,
{
    let start = Instant::now();
    let mut interval = backoff.first;
    loop {
        let state = match check().await? {
            Poll::Done(v) => return Ok(v),
            Poll::Pending(state) => state,
        };
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            return Err(AwsError::new(
                format!("waiting for {what}"),
                None,
                format!(
                    "still {state} after {}s; raise the timeout in the resource's timeouts block",
                    timeout.as_secs()
                ),
            ));
        }
        tokio::time::sleep(interval.min(timeout - elapsed)).await;
        interval = (interval * 3 / 2).min(backoff.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls a few milliseconds apart: the tests wait in real time (tokio's paused clock would
    /// need its test-util feature, and a feature only tests enable rebuilds every crate above
    /// tokio for `cargo test`).
    const QUICK: Backoff = Backoff {
        first: Duration::from_millis(1),
        max: Duration::from_millis(20),
    };

    #[tokio::test]
    async fn waits_until_done() {
        let mut n = 0;
        let got = until("thing", Duration::from_secs(60), QUICK, || {
            n += 1;
            let done = n >= 3;
            async move {
                Ok(if done {
                    Poll::Done(n)
                } else {
                    Poll::Pending("CREATING".into())
                })
            }
        })
        .await;
        assert_eq!(got, Ok(3));
    }

    #[tokio::test]
    async fn times_out_naming_the_state() {
        let got: Result<()> = until("file system fs-1", Duration::from_secs(1), QUICK, || async {
            Ok(Poll::Pending("UPDATING".into()))
        })
        .await;
        let err = got.expect_err("timeout");
        assert!(err.to_string().contains("still UPDATING after 1s"), "{err}");
    }

    #[tokio::test]
    async fn errors_stop_the_wait() {
        let got: Result<()> = until("x", Duration::from_secs(60), Backoff::default(), || async {
            Err(AwsError::new("x", Some("FAILED"), "boom"))
        })
        .await;
        assert_eq!(got.map_err(|e| e.code), Err(Some("FAILED".to_string())));
    }
}
