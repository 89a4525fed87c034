//! Uploading a raw disk image into an EBS snapshot through the EBS direct APIs
//! (StartSnapshot, PutSnapshotBlock, CompleteSnapshot), the way AWS's coldsnap does:
//! 512 KiB blocks, zero blocks skipped (a new snapshot reads them as zeros), a bounded number
//! of blocks in flight, each block retried on its own, SHA-256 per block and a linear
//! aggregate checksum that EBS verifies on completion.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_ebs::types::{ChecksumAggregationMethod, ChecksumAlgorithm, Tag};
use aws_sdk_ebs::Client;
use aws_smithy_types::byte_stream::ByteStream;
use base64::Engine as _;
use futures::stream::{self, StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};

use crate::error::{AwsError, Result};

/// EBS direct API block size.
pub const BLOCK_SIZE: u64 = 512 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;
/// Attempts per block on top of the SDK's own retries (which cover throttling).
const BLOCK_ATTEMPTS: u32 = 4;

#[derive(Debug, Clone)]
pub struct UploadRequest {
    pub description: String,
    pub tags: Vec<(String, String)>,
    /// Encrypt the snapshot; with `kms_key_arn` None, EBS uses the account's default key.
    pub encrypted: bool,
    pub kms_key_arn: Option<String>,
    /// Blocks in flight at once.
    pub concurrency: usize,
    /// Makes StartSnapshot idempotent across retries of this upload.
    pub client_token: String,
}

/// What an upload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadReport {
    pub snapshot_id: String,
    pub volume_size_gib: i64,
    pub blocks_total: u64,
    /// Blocks with data (sent); the rest were zero and skipped.
    pub blocks_uploaded: u64,
    pub bytes_uploaded: u64,
    pub elapsed: Duration,
}

#[derive(Clone, Debug)]
pub struct Ebs {
    client: Client,
    region: String,
}

/// Volume size in GiB for a disk of `bytes` (rounded up, at least 1).
pub fn volume_size_gib(bytes: u64) -> i64 {
    i64::try_from(bytes.div_ceil(GIB).max(1)).unwrap_or(i64::MAX)
}

/// base64(SHA-256(data)), the form EBS takes checksums in.
pub fn block_checksum(data: &[u8]) -> (String, [u8; 32]) {
    let digest: [u8; 32] = Sha256::digest(data).into();
    (base64::engine::general_purpose::STANDARD.encode(digest), digest)
}

/// The LINEAR aggregate: SHA-256 over the blocks' digests in ascending block order.
pub fn aggregate_checksum(mut digests: Vec<(u64, [u8; 32])>) -> String {
    digests.sort_by_key(|(i, _)| *i);
    let mut h = Sha256::new();
    for (_, d) in &digests {
        h.update(d);
    }
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// Reads block `index` of the file, zero-padded to a full block; None when it is all zeros.
fn read_block(file: &File, len: u64, index: u64) -> std::io::Result<Option<Vec<u8>>> {
    let offset = index * BLOCK_SIZE;
    let mut buf = vec![0u8; BLOCK_SIZE as usize];
    let want = (len - offset).min(BLOCK_SIZE) as usize;
    file.read_exact_at(&mut buf[..want], offset)?;
    Ok(buf.iter().any(|b| *b != 0).then_some(buf))
}

impl Ebs {
    pub fn new(client: Client, region: String) -> Self {
        Ebs { client, region }
    }

    fn err<E>(&self, what: &str, e: &E) -> AwsError
    where
        E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
    {
        AwsError::from_sdk(format!("{what} ({})", self.region), e)
    }

    /// Uploads the file into a new snapshot and completes it. On failure the partial
    /// snapshot id is in the error's message; the caller deletes it (EC2 DeleteSnapshot).
    pub async fn upload(&self, path: &Path, req: &UploadRequest) -> std::result::Result<UploadReport, UploadError> {
        let started = Instant::now();
        let file = File::open(path).map_err(|e| UploadError::local(path, e))?;
        let len = file.metadata().map_err(|e| UploadError::local(path, e))?.len();
        let volume_size_gib = volume_size_gib(len);
        let blocks_total = len.div_ceil(BLOCK_SIZE);
        let snapshot_id = self.start(req, volume_size_gib).await?;
        let fail = |error: AwsError| UploadError::Aws {
            snapshot_id: Some(snapshot_id.clone()),
            error,
        };
        let bytes = AtomicU64::new(0);
        let digests = self
            .put_blocks(&snapshot_id, Arc::new(file), len, req.concurrency, &bytes)
            .await
            .map_err(fail)?;
        let blocks_uploaded = digests.len() as u64;
        let changed = i32::try_from(blocks_uploaded).map_err(|_| {
            fail(AwsError::new(
                "completing snapshot",
                None,
                "more blocks than EBS accepts in one snapshot",
            ))
        })?;
        self.client
            .complete_snapshot()
            .snapshot_id(&snapshot_id)
            .changed_blocks_count(changed)
            .checksum(aggregate_checksum(digests))
            .checksum_algorithm(ChecksumAlgorithm::ChecksumAlgorithmSha256)
            .checksum_aggregation_method(ChecksumAggregationMethod::ChecksumAggregationLinear)
            .send()
            .await
            .map_err(|e| fail(self.err(&format!("completing snapshot {snapshot_id}"), &e)))?;
        Ok(UploadReport {
            snapshot_id,
            volume_size_gib,
            blocks_total,
            blocks_uploaded,
            bytes_uploaded: bytes.load(Ordering::Relaxed),
            elapsed: started.elapsed(),
        })
    }

    /// Starts the snapshot (idempotent on the request's client token) and checks that its
    /// blocks are the size this uploader writes.
    async fn start(&self, req: &UploadRequest, volume_size_gib: i64) -> std::result::Result<String, UploadError> {
        let tags: Vec<Tag> = req
            .tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let start = self
            .client
            .start_snapshot()
            .volume_size(volume_size_gib)
            .description(&req.description)
            .set_tags((!tags.is_empty()).then_some(tags))
            .encrypted(req.encrypted)
            .set_kms_key_arn(req.kms_key_arn.clone())
            .client_token(&req.client_token)
            .timeout(60)
            .send()
            .await
            .map_err(|e| UploadError::Aws {
                snapshot_id: None,
                error: self.err("starting snapshot", &e),
            })?;
        let snapshot_id = start.snapshot_id().unwrap_or_default().to_string();
        match start.block_size() {
            Some(size) if u64::try_from(size).ok() != Some(BLOCK_SIZE) => Err(UploadError::Aws {
                snapshot_id: Some(snapshot_id),
                error: AwsError::new(
                    "starting snapshot",
                    None,
                    format!("EBS uses {size}-byte blocks; this uploader writes {BLOCK_SIZE}"),
                ),
            }),
            _ => Ok(snapshot_id),
        }
    }

    /// Sends the file's blocks that hold data, `concurrency` at a time, counting the bytes sent
    /// in `bytes`; the (index, SHA-256) of each block sent.
    async fn put_blocks(
        &self,
        snapshot_id: &str,
        file: Arc<File>,
        len: u64,
        concurrency: usize,
        bytes: &AtomicU64,
    ) -> Result<Vec<(u64, [u8; 32])>> {
        let blocks_total = len.div_ceil(BLOCK_SIZE);
        stream::iter(0..blocks_total)
            .map(|index| {
                let file = Arc::clone(&file);
                async move {
                    let block = tokio::task::spawn_blocking(move || read_block(&file, len, index))
                        .await
                        .map_err(|e| AwsError::new("reading the image", None, e.to_string()))?
                        .map_err(|e| AwsError::new("reading the image", None, e.to_string()))?;
                    let Some(data) = block else {
                        return Ok(None);
                    };
                    let digest = self.put_block(snapshot_id, index, data, blocks_total).await?;
                    bytes.fetch_add(BLOCK_SIZE, Ordering::Relaxed);
                    Ok(Some((index, digest)))
                }
            })
            .buffer_unordered(concurrency.max(1))
            .try_filter_map(|d| async move { Ok(d) })
            .try_collect()
            .await
    }

    /// Sends one block, retrying it on its own (on top of the SDK's retries).
    async fn put_block(&self, snapshot_id: &str, index: u64, data: Vec<u8>, total: u64) -> Result<[u8; 32]> {
        let (checksum, digest) = block_checksum(&data);
        let block_index = i32::try_from(index)
            .map_err(|_| AwsError::new("uploading block", None, format!("block index {index} is too large")))?;
        let progress = i32::try_from((index + 1) * 100 / total.max(1)).unwrap_or(100);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent = self
                .client
                .put_snapshot_block()
                .snapshot_id(snapshot_id)
                .block_index(block_index)
                .block_data(ByteStream::from(data.clone()))
                .data_length(BLOCK_SIZE as i32)
                .checksum(&checksum)
                .checksum_algorithm(ChecksumAlgorithm::ChecksumAlgorithmSha256)
                .progress(progress)
                .send()
                .await;
            match sent {
                Ok(_) => return Ok(digest),
                Err(e) => {
                    let err = self.err(&format!("uploading block {index} of {snapshot_id}"), &e);
                    // Not-found is retried: EBS can briefly not know a snapshot it just started (coldsnap retries it too).
                    let permanent = err.code_is(&["ValidationException", "AccessDeniedException"]);
                    if permanent || attempt >= BLOCK_ATTEMPTS {
                        return Err(err);
                    }
                    tokio::time::sleep(Duration::from_millis(250 * 2u64.pow(attempt))).await;
                }
            }
        }
    }
}

/// An upload failure, with the snapshot it left behind (if it got that far).
#[derive(Debug)]
pub enum UploadError {
    Local {
        path: String,
        error: std::io::Error,
    },
    Aws {
        snapshot_id: Option<String>,
        error: AwsError,
    },
}

impl UploadError {
    fn local(path: &Path, error: std::io::Error) -> Self {
        UploadError::Local {
            path: path.display().to_string(),
            error,
        }
    }

    pub fn snapshot_id(&self) -> Option<&str> {
        match self {
            UploadError::Aws { snapshot_id, .. } => snapshot_id.as_deref(),
            UploadError::Local { .. } => None,
        }
    }
}

impl std::fmt::Display for UploadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UploadError::Local { path, error } => write!(f, "reading {path}: {error}"),
            UploadError::Aws { error, .. } => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for UploadError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_size_rounds_up_to_whole_gib() {
        assert_eq!(volume_size_gib(1), 1);
        assert_eq!(volume_size_gib(GIB), 1);
        assert_eq!(volume_size_gib(GIB + 1), 2);
        assert_eq!(volume_size_gib(4 * GIB), 4);
    }

    #[test]
    fn aggregate_checksum_follows_block_order_not_arrival_order() {
        let a = block_checksum(b"a").1;
        let b = block_checksum(b"b").1;
        assert_eq!(
            aggregate_checksum(vec![(1, b), (0, a)]),
            aggregate_checksum(vec![(0, a), (1, b)])
        );
        assert_ne!(
            aggregate_checksum(vec![(0, b), (1, a)]),
            aggregate_checksum(vec![(0, a), (1, b)])
        );
    }

    #[test]
    fn zero_blocks_are_skipped_and_the_tail_is_padded() {
        let dir = std::env::temp_dir().join(format!("hpc-ebs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("disk.raw");
        let mut data = vec![0u8; (BLOCK_SIZE * 2 + 10) as usize];
        data[(BLOCK_SIZE * 2 + 3) as usize] = 7;
        std::fs::write(&path, &data).expect("write");
        let file = File::open(&path).expect("open");
        let len = data.len() as u64;
        assert_eq!(read_block(&file, len, 0).expect("read"), None);
        assert_eq!(read_block(&file, len, 1).expect("read"), None);
        let tail = read_block(&file, len, 2).expect("read").expect("data");
        assert_eq!(tail.len() as u64, BLOCK_SIZE);
        assert_eq!(tail[3], 7);
        std::fs::remove_dir_all(&dir).ok();
    }
}
