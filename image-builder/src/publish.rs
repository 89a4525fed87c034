//! Publishing a raw disk as an AMI: upload into an EBS snapshot (EBS direct APIs), register
//! it (idempotent by name; the snapshot is deleted if registration fails), copy to the other
//! regions with bounded concurrency, share with accounts, and write a Packer-style manifest.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use hpc_aws::ebs::{UploadReport, UploadRequest};
use hpc_aws::image::{ImageInfo, RegisterRequest};
use hpc_aws::Aws;
use serde::Serialize;

use crate::plan::{sha256_hex, PublishConfig};

const IMAGE_TIMEOUT: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UploadStats {
    pub snapshot_id: String,
    pub blocks_total: u64,
    pub blocks_uploaded: u64,
    pub bytes_uploaded: u64,
    pub concurrency: usize,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PublishReport {
    /// region → AMI id.
    pub images: BTreeMap<String, String>,
    /// Regions where the image already existed (nothing was done there).
    pub unchanged: Vec<String>,
    pub upload: Option<UploadStats>,
    pub seconds: f64,
}

#[derive(Debug)]
pub struct PublishError {
    pub message: String,
    /// What did succeed before the failure (reported before failing).
    pub images: BTreeMap<String, String>,
}

impl std::fmt::Display for PublishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)?;
        if !self.images.is_empty() {
            let done: Vec<String> = self.images.iter().map(|(r, a)| format!("{r}: {a}")).collect();
            write!(f, "\n(published before the failure: {})", done.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for PublishError {}

fn fail(message: impl Into<String>, images: &BTreeMap<String, String>) -> PublishError {
    PublishError {
        message: message.into(),
        images: images.clone(),
    }
}

/// Tags every published image and snapshot carries, besides the template's.
pub fn image_tags(cfg: &PublishConfig, template_sha256: &str) -> Vec<(String, String)> {
    let mut tags: Vec<(String, String)> = cfg.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    tags.push((
        hpc_desired_state::tag::BUILDER.into(),
        format!("hpc-image {}", env!("CARGO_PKG_VERSION")),
    ));
    tags.push(("hpcforge:template-sha256".into(), template_sha256.to_string()));
    tags
}

/// A client token (≤ 64 characters) from the things that make a publish the same publish.
fn token(parts: &[&str]) -> String {
    sha256_hex(parts.join("\n").as_bytes())[..48].to_string()
}

/// Publishes `disk` as `cfg.ami_name` in every region. Re-running with the same name changes
/// nothing: regions that have the image are left alone. `disk` is None when the image was made
/// in the first region already (the amazon-ebs builder's CreateImage): only copies and sharing.
pub async fn publish(
    aws: &Aws,
    cfg: &PublishConfig,
    disk: Option<&Path>,
    template_sha256: &str,
    say: &mut dyn FnMut(&str),
) -> Result<PublishReport, PublishError> {
    let started = Instant::now();
    let mut images = BTreeMap::new();
    let mut unchanged = Vec::new();
    let home = cfg
        .regions
        .first()
        .ok_or_else(|| fail("publish.regions is empty", &images))?
        .clone();
    let (source, upload) = home_image(aws, cfg, &home, disk, template_sha256, say).await?;
    if upload.is_none() {
        unchanged.push(home.clone());
    }
    images.insert(home.clone(), source.id.clone());
    copy_everywhere(aws, cfg, &home, &source.id, &mut images, &mut unchanged, say).await?;
    if !cfg.share_with_accounts.is_empty() {
        share(aws, cfg, &images).await?;
        say(&format!(
            "    shared with {} in {} region(s)",
            cfg.share_with_accounts.join(", "),
            images.len()
        ));
    }
    unchanged.sort();
    Ok(PublishReport {
        images,
        unchanged,
        upload,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The image in the first region: the one there by that name already, or `disk` uploaded and
/// registered (with what the upload did).
async fn home_image(
    aws: &Aws,
    cfg: &PublishConfig,
    home: &str,
    disk: Option<&Path>,
    template_sha256: &str,
    say: &mut dyn FnMut(&str),
) -> Result<(ImageInfo, Option<UploadStats>), PublishError> {
    let none = BTreeMap::new();
    let existing = aws
        .ec2_in(home)
        .find_own_image(&cfg.ami_name)
        .await
        .map_err(|e| fail(e.to_string(), &none))?;
    if let Some(img) = existing {
        say(&format!(
            "    {home}: {} already exists as {}; nothing to upload",
            cfg.ami_name, img.id
        ));
        return Ok((img, None));
    }
    let disk = disk.ok_or_else(|| {
        fail(
            format!(
                "{home} has no image named {:?} and there is no disk to upload",
                cfg.ami_name
            ),
            &none,
        )
    })?;
    let tags = image_tags(cfg, template_sha256);
    let (report, stats) = upload(aws, cfg, home, disk, &tags, template_sha256, say).await?;
    let img = register(aws, cfg, home, &report, &tags).await?;
    say(&format!("    {home}: registered {} ({})", img.id, cfg.ami_name));
    Ok((img, Some(stats)))
}

/// Copies the image into the other regions, a few at a time; every success is reported (and
/// recorded in `images`) before any failure.
async fn copy_everywhere(
    aws: &Aws,
    cfg: &PublishConfig,
    home: &str,
    source_id: &str,
    images: &mut BTreeMap<String, String>,
    unchanged: &mut Vec<String>,
    say: &mut dyn FnMut(&str),
) -> Result<(), PublishError> {
    let others: Vec<String> = cfg.regions.iter().skip(1).cloned().collect();
    let results: Vec<(String, CopyResult)> = stream::iter(others)
        .map(|region| async move {
            let r = copy_to(aws, cfg, home, source_id, &region).await;
            (region, r)
        })
        .buffer_unordered(cfg.copy_concurrency)
        .collect()
        .await;
    let mut failures = Vec::new();
    for (region, r) in results {
        match r {
            Ok((id, existed)) => {
                say(&format!(
                    "    {region}: {id}{}",
                    if existed { " (already there)" } else { " (copied)" }
                ));
                if existed {
                    unchanged.push(region.clone());
                }
                images.insert(region, id);
            }
            Err(e) => failures.push(format!("{region}: {e}")),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(fail(
            format!("copying the image failed in {}", failures.join("; ")),
            images,
        ))
    }
}

/// Shares every region's image with `share_with_accounts`.
async fn share(aws: &Aws, cfg: &PublishConfig, images: &BTreeMap<String, String>) -> Result<(), PublishError> {
    for (region, id) in images {
        let ec2 = aws.ec2_in(region);
        let info = ec2
            .describe_image(id)
            .await
            .map_err(|e| fail(e.to_string(), images))?
            .ok_or_else(|| fail(format!("{region}: image {id} vanished before sharing"), images))?;
        ec2.share_image(&info, &cfg.share_with_accounts)
            .await
            .map_err(|e| fail(e.to_string(), images))?;
    }
    Ok(())
}

/// Uploads `disk` into an EBS snapshot in `region`; an incomplete snapshot is deleted.
async fn upload(
    aws: &Aws,
    cfg: &PublishConfig,
    region: &str,
    disk: &Path,
    tags: &[(String, String)],
    template_sha256: &str,
    say: &mut dyn FnMut(&str),
) -> Result<(UploadReport, UploadStats), PublishError> {
    let none = BTreeMap::new();
    let size = std::fs::metadata(disk)
        .map_err(|e| fail(format!("reading {}: {e}", disk.display()), &none))?
        .len();
    let req = UploadRequest {
        description: format!("{} root volume (hpc-image)", cfg.ami_name),
        tags: tags.to_vec(),
        encrypted: cfg.encrypted,
        kms_key_arn: cfg.kms_key_id.clone(),
        concurrency: cfg.upload_concurrency,
        client_token: token(&[&cfg.ami_name, region, template_sha256, &size.to_string()]),
    };
    say(&format!(
        "    {region}: uploading {} into an EBS snapshot",
        disk.display()
    ));
    let report = match aws.ebs_in(region).upload(disk, &req).await {
        Ok(r) => r,
        Err(e) => {
            let mut message = format!("uploading the image: {e}");
            if let Some(snap) = e.snapshot_id() {
                match aws.ec2_in(region).delete_snapshot(snap).await {
                    Ok(()) => message.push_str(&format!(" (incomplete snapshot {snap} deleted)")),
                    Err(d) => message.push_str(&format!(" (and deleting the incomplete snapshot {snap} failed: {d})")),
                }
            }
            return Err(fail(message, &none));
        }
    };
    let stats = UploadStats {
        snapshot_id: report.snapshot_id.clone(),
        blocks_total: report.blocks_total,
        blocks_uploaded: report.blocks_uploaded,
        bytes_uploaded: report.bytes_uploaded,
        concurrency: cfg.upload_concurrency,
        seconds: report.elapsed.as_secs_f64(),
    };
    say(&format!(
        "    {region}: {} of {} blocks sent ({} MiB) in {:.1}s → {}",
        report.blocks_uploaded,
        report.blocks_total,
        report.bytes_uploaded >> 20,
        stats.seconds,
        report.snapshot_id
    ));
    Ok((report, stats))
}

/// Registers the uploaded snapshot as the image and waits until it is available; on failure
/// the snapshot is deleted.
async fn register(
    aws: &Aws,
    cfg: &PublishConfig,
    region: &str,
    report: &UploadReport,
    tags: &[(String, String)],
) -> Result<ImageInfo, PublishError> {
    let ec2 = aws.ec2_in(region);
    let registered = async {
        ec2.wait_snapshot_completed(&report.snapshot_id, 2, IMAGE_TIMEOUT)
            .await?;
        let id = ec2
            .register_image(&RegisterRequest {
                name: cfg.ami_name.clone(),
                description: cfg.description.clone(),
                snapshot_id: report.snapshot_id.clone(),
                root_device: "/dev/xvda".into(),
                root_volume_gib: i32::try_from(report.volume_size_gib).unwrap_or(i32::MAX),
                tags: tags.to_vec(),
            })
            .await?;
        ec2.wait_image_available(&id, IMAGE_TIMEOUT).await
    }
    .await;
    let e = match registered {
        Ok(img) => return Ok(img),
        Err(e) => e,
    };
    let mut message = format!("registering the image: {e}");
    match ec2.delete_snapshot(&report.snapshot_id).await {
        Ok(()) => message.push_str(&format!(" (snapshot {} deleted)", report.snapshot_id)),
        Err(d) => message.push_str(&format!(" (and deleting snapshot {} failed: {d})", report.snapshot_id)),
    }
    Err(fail(message, &BTreeMap::new()))
}

/// A copy's outcome: (AMI id, whether it was there already), or what went wrong.
type CopyResult = Result<(String, bool), String>;

/// Copies the image into `region` unless it is there already; (id, already there).
async fn copy_to(aws: &Aws, cfg: &PublishConfig, home: &str, source_id: &str, region: &str) -> CopyResult {
    let ec2 = aws.ec2_in(region);
    if let Some(img) = ec2.find_own_image(&cfg.ami_name).await.map_err(|e| e.to_string())? {
        return Ok((img.id, true));
    }
    let id = ec2
        .copy_image(
            home,
            source_id,
            &cfg.ami_name,
            &cfg.description,
            &token(&[&cfg.ami_name, source_id, region]),
        )
        .await
        .map_err(|e| e.to_string())?;
    ec2.wait_image_available(&id, IMAGE_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    Ok((id, false))
}

/// The manifest: Packer's `builds` list, plus region → AMI, components and the template hash.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub builds: Vec<ManifestBuild>,
    pub last_run_uuid: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ManifestBuild {
    pub name: String,
    pub builder_type: String,
    pub build_time: u64,
    /// `region:ami,region:ami` as Packer writes it.
    pub artifact_id: String,
    pub packer_run_uuid: String,
    pub images: BTreeMap<String, String>,
    pub ami_name: String,
    pub components: Vec<ManifestComponent>,
    pub template_sha256: String,
    pub upload: Option<UploadStats>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ManifestComponent {
    pub name: String,
    pub version: String,
    pub args: BTreeMap<String, String>,
}

pub fn artifact_id(images: &BTreeMap<String, String>) -> String {
    images
        .iter()
        .map(|(r, a)| format!("{r}:{a}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_id_lists_region_ami_pairs_like_packer() {
        let images = BTreeMap::from([
            ("us-west-2".to_string(), "ami-2".to_string()),
            ("us-east-1".to_string(), "ami-1".to_string()),
        ]);
        assert_eq!(artifact_id(&images), "us-east-1:ami-1,us-west-2:ami-2");
    }

    #[test]
    fn tokens_are_stable_and_short() {
        let a = token(&["name", "us-east-1"]);
        assert_eq!(a, token(&["name", "us-east-1"]));
        assert_ne!(a, token(&["name", "us-west-2"]));
        assert!(a.len() <= 64);
    }

    #[test]
    fn errors_report_what_was_published_before_the_failure() {
        let images = BTreeMap::from([("us-east-1".to_string(), "ami-1".to_string())]);
        let e = fail("copying the image failed in eu-west-1: boom", &images);
        assert!(e.to_string().contains("published before the failure: us-east-1: ami-1"));
    }
}
