//! A bootable raw GPT disk from a root directory, without mounting anything: an EFI system
//! partition holding a standalone GRUB (mkfs.vfat + mtools + grub-mkstandalone) and an ext4
//! root made with `mkfs.ext4 -d`, both written into a sparse file laid out by sfdisk.

use std::fs::{self, File};
use std::path::Path;

use tokio::process::Command;

use crate::host::{copy_sparse, run, BuildError, Result};

const MIB: u64 = 1 << 20;
/// The ESP starts at 1 MiB and is 64 MiB; the root partition follows.
const ESP_START: u64 = MIB;
const ESP_SIZE: u64 = 64 * MIB;
const ROOT_START: u64 = ESP_START + ESP_SIZE;
/// Room left at the end for the backup GPT.
const TAIL: u64 = MIB;

/// GPT type GUIDs.
const ESP_TYPE: &str = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";
const ROOT_X86_64_TYPE: &str = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709";

/// The sfdisk script for a disk of `size` bytes.
pub fn partition_table(size: u64) -> String {
    let sector = 512;
    let root_size = size - ROOT_START - TAIL;
    format!(
        "label: gpt\nunit: sectors\nfirst-lba: 2048\n\
         start={}, size={}, type={ESP_TYPE}, name=\"EFI\"\n\
         start={}, size={}, type={ROOT_X86_64_TYPE}, name=\"root\"\n",
        ESP_START / sector,
        ESP_SIZE / sector,
        ROOT_START / sector,
        root_size / sector
    )
}

/// The kernel and initrd paths GRUB boots: Debian's /vmlinuz and /initrd.img symlinks when
/// present (they follow kernel upgrades), else the newest versioned files in /boot.
fn kernel_paths(root: &Path) -> Result<(String, String)> {
    if root.join("vmlinuz").exists() && root.join("initrd.img").exists() {
        return Ok(("/vmlinuz".into(), "/initrd.img".into()));
    }
    let mut versions: Vec<String> = fs::read_dir(root.join("boot"))
        .map_err(|e| BuildError::new(format!("reading /boot of the image: {e}")))?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("vmlinuz-"))
                .map(str::to_string)
        })
        .collect();
    versions.sort();
    let v = versions
        .pop()
        .ok_or_else(|| BuildError::new("the image has no kernel in /boot (is linux-image-cloud-amd64 installed?)"))?;
    if !root.join(format!("boot/initrd.img-{v}")).exists() {
        return Err(BuildError::new(format!("the image has no initrd for kernel {v}")));
    }
    Ok((format!("/boot/vmlinuz-{v}"), format!("/boot/initrd.img-{v}")))
}

pub fn grub_config(uuid: &str, kernel: &str, initrd: &str) -> String {
    format!(
        "insmod part_gpt\ninsmod ext2\nsearch --no-floppy --fs-uuid --set=root {uuid}\nset timeout=0\n\
         linux {kernel} root=UUID={uuid} ro console=tty0 console=ttyS0,115200n8 nvme_core.io_timeout=4294967295\n\
         initrd {initrd}\nboot\n"
    )
}

/// Writes fstab into the root, then the disk image at `disk`.
pub async fn write_disk(root: &Path, work: &Path, disk: &Path, size: u64, log: &Path) -> Result<()> {
    let uuid = uuid::Uuid::new_v4().to_string();
    let (kernel, initrd) = kernel_paths(root)?;
    fs::write(
        root.join("etc/fstab"),
        format!("# hpc-image\nUUID={uuid} / ext4 rw,discard,errors=remount-ro 0 1\n"),
    )
    .map_err(|e| BuildError::new(format!("writing fstab: {e}")))?;

    let esp = work.join("esp.img");
    let rootimg = work.join("root.img");
    let efi = work.join("BOOTX64.EFI");
    for f in [&esp, &rootimg, &efi] {
        let _ = fs::remove_file(f);
    }
    let grubcfg = work.join("grub.cfg");
    fs::write(&grubcfg, grub_config(&uuid, &kernel, &initrd))
        .map_err(|e| BuildError::new(format!("writing grub.cfg: {e}")))?;
    write_esp(&grubcfg, &efi, &esp, log).await?;
    let root_size = size - ROOT_START - TAIL;
    run(
        Command::new("mkfs.ext4")
            .args(["-q", "-F", "-L", "root", "-U", &uuid, "-E", "root_owner=0:0", "-d"])
            .arg(root)
            .arg(&rootimg)
            .arg(format!("{}k", root_size / 1024)),
        "mkfs.ext4 (copying the root file system)",
        log,
    )
    .await?;

    let tmp = disk.with_extension("raw.tmp");
    let _ = fs::remove_file(&tmp);
    {
        let f = File::create(&tmp).map_err(|e| BuildError::new(format!("creating {}: {e}", tmp.display())))?;
        f.set_len(size)
            .map_err(|e| BuildError::new(format!("sizing the disk: {e}")))?;
    }
    write_partition_table(&tmp, &work.join("partitions.sfdisk"), size, log).await?;
    let mut f = File::options()
        .write(true)
        .open(&tmp)
        .map_err(|e| BuildError::new(format!("opening the disk: {e}")))?;
    copy_sparse(&esp, &mut f, ESP_START).map_err(|e| BuildError::new(format!("writing the ESP: {e}")))?;
    copy_sparse(&rootimg, &mut f, ROOT_START).map_err(|e| BuildError::new(format!("writing the root: {e}")))?;
    f.sync_all()
        .map_err(|e| BuildError::new(format!("syncing the disk: {e}")))?;
    drop(f);
    fs::rename(&tmp, disk).map_err(|e| BuildError::new(format!("storing {}: {e}", disk.display())))?;
    for f in [&esp, &rootimg, &efi] {
        let _ = fs::remove_file(f);
    }
    Ok(())
}

/// The EFI system partition's image at `esp`: GRUB as a standalone EFI binary (`efi`) with
/// `grubcfg` inside, at the removable-media path firmware boots.
async fn write_esp(grubcfg: &Path, efi: &Path, esp: &Path, log: &Path) -> Result<()> {
    run(
        Command::new("grub-mkstandalone")
            .args(["-O", "x86_64-efi", "--modules=part_gpt ext2 search_fs_uuid", "-o"])
            .arg(efi)
            .arg(format!("boot/grub/grub.cfg={}", grubcfg.display())),
        "grub-mkstandalone",
        log,
    )
    .await?;
    run(
        Command::new("mkfs.vfat")
            .args(["-F", "32", "-n", "EFI", "-C"])
            .arg(esp)
            .arg((ESP_SIZE / 1024).to_string()),
        "mkfs.vfat",
        log,
    )
    .await?;
    run(
        Command::new("mmd").arg("-i").arg(esp).args(["::/EFI", "::/EFI/BOOT"]),
        "mmd",
        log,
    )
    .await?;
    run(
        Command::new("mcopy")
            .arg("-i")
            .arg(esp)
            .arg(efi)
            .arg("::/EFI/BOOT/BOOTX64.EFI"),
        "mcopy",
        log,
    )
    .await
}

/// Writes the GPT of a `size`-byte disk into the file `disk` with sfdisk (its script kept at `table`).
async fn write_partition_table(disk: &Path, table: &Path, size: u64, log: &Path) -> Result<()> {
    fs::write(table, partition_table(size)).map_err(|e| BuildError::new(format!("writing the table: {e}")))?;
    let table_file = File::open(table).map_err(|e| BuildError::new(format!("{e}")))?;
    let out = File::options()
        .append(true)
        .create(true)
        .open(log)
        .map_err(|e| BuildError::new(format!("{e}")))?;
    let status = Command::new("sfdisk")
        .args(["--no-reread", "--no-tell-kernel", "-q"])
        .arg(disk)
        .stdin(table_file)
        .stdout(out.try_clone().map_err(|e| BuildError::new(format!("{e}")))?)
        .stderr(out)
        .status()
        .await
        .map_err(|e| BuildError::new(format!("running sfdisk: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(BuildError {
            message: format!("sfdisk failed ({status})"),
            output: Some(crate::progress::tail(log, 20)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_table_fills_the_disk_after_the_esp() {
        let t = partition_table(4 << 30);
        assert!(t.contains("start=2048, size=131072, type=C12A7328"), "{t}");
        // 4 GiB = 8388608 sectors; root starts at 133120 and leaves 2048 at the end.
        assert!(
            t.contains(&format!(
                "start=133120, size={}, type=4F68BCE3",
                8_388_608 - 133_120 - 2048
            )),
            "{t}"
        );
    }

    #[test]
    fn grub_boots_the_root_by_uuid_with_a_serial_console() {
        let g = grub_config("1234", "/vmlinuz", "/initrd.img");
        assert!(g.contains("search --no-floppy --fs-uuid --set=root 1234"));
        assert!(g.contains("linux /vmlinuz root=UUID=1234 ro console=tty0 console=ttyS0,115200n8"));
    }
}
