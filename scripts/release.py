#!/usr/bin/env python3
"""Package terraform-provider-hpc as a Terraform registry release and as a provider mirror.

    release.py --version 0.1.0 --binary linux_amd64=target/release/terraform-provider-hpc \
               --out dist [--gpg-key KEYID | --unsigned]

writes, for each version (a second run with another version adds to the same tree):

    dist/release/<version>/terraform-provider-hpc_<version>_<os>_<arch>.zip   (one per platform)
    dist/release/<version>/terraform-provider-hpc_<version>_manifest.json     (protocol 6.0)
    dist/release/<version>/terraform-provider-hpc_<version>_SHA256SUMS
    dist/release/<version>/terraform-provider-hpc_<version>_SHA256SUMS.sig    (detached, binary)
    dist/mirror/registry.terraform.io/hpcforge/hpc/...                        (both mirror layouts)
    dist/modules/terraform-hpc-slurm/ and terraform-hpc-slurm-<version>.tar.gz (the modules)
    dist/registry/...                                   (the module registry protocol's files)

The mirror tree is what `terraform providers mirror` writes: the zips in the packed layout a
`filesystem_mirror` reads, and the `index.json` / `<version>.json` files of the provider
network mirror protocol (hashes in Terraform's h1 form) for a `network_mirror` served over HTTPS.
`make release` builds the binaries and calls this; it is a packager only.

The modules are one registry package, `hpcforge/slurm/hpc`, in the layout the Terraform
Registry reads from a `terraform-hpc-slurm` repository: slurm-cluster at the root, the others
under modules/ (`hpcforge/slurm/hpc//modules/gpu-partition`). dist/registry holds what a module
registry serves for it (service discovery, the versions list, the package); the download
endpoint's `X-Terraform-Get` answer is the one thing a static file server cannot give.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

NAME = "terraform-provider-hpc"
ADDRESS = ("registry.terraform.io", "hpcforge", "hpc")
PROTOCOL_VERSIONS = ["6.0"]
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
PLATFORM_RE = re.compile(r"^(linux|darwin|windows|freebsd)_(amd64|arm64|386|arm)$")


class ReleaseError(Exception):
    pass


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The registry package of the modules: its namespace/name/provider, the module at its root, and
# the repository name the Terraform Registry requires for it.
MODULE_PACKAGE = ("hpcforge", "slurm", "hpc")
ROOT_MODULE = "slurm-cluster"
MODULE_REPOSITORY = "terraform-hpc-slurm"
MODULE_SOURCE_RE = re.compile(r'source\s*=\s*"\.\./([a-z0-9-]+)"')


def package_modules(version, out):
    """The modules in the registry's repository layout, as a folder and a .tar.gz."""
    modules = os.path.join(ROOT, "modules")
    names = sorted(n for n in os.listdir(modules) if os.path.isdir(os.path.join(modules, n)))
    if ROOT_MODULE not in names:
        raise ReleaseError(f"modules/{ROOT_MODULE} is missing: it is the package's root module")
    tree = os.path.join(out, "modules", MODULE_REPOSITORY)
    shutil.rmtree(tree, ignore_errors=True)
    for name in names:
        dest = tree if name == ROOT_MODULE else os.path.join(tree, "modules", name)
        shutil.copytree(os.path.join(modules, name), dest, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"))
        relink_sources(dest, at_root=name == ROOT_MODULE, names=names)
    archive = os.path.join(out, "modules", f"{MODULE_REPOSITORY}-{version}.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        for entry in sorted(os.listdir(tree)):
            tar.add(os.path.join(tree, entry), arcname=entry)
    return archive


def relink_sources(folder, at_root, names):
    """A module's `source = "../<module>"` as the package lays the modules out: from the root
    ./modules/<module>, from a submodule ../<module> still (or ../../ for the root module)."""
    for entry in sorted(os.listdir(folder)):
        if not entry.endswith(".tf"):
            continue
        path = os.path.join(folder, entry)
        with open(path) as f:
            text = f.read()

        def relink(match):
            target = match.group(1)
            if target not in names:
                raise ReleaseError(f"{path}: source \"../{target}\" names no module of modules/")
            if at_root:
                return f'source = "./modules/{target}"'
            return f'source = "../../"' if target == ROOT_MODULE else match.group(0)

        changed = MODULE_SOURCE_RE.sub(relink, text)
        if "../../modules/" in changed or re.search(r'source\s*=\s*"\.\./\.\./[a-z]', changed):
            raise ReleaseError(f"{path}: a source outside modules/ cannot be packaged")
        if changed != text:
            with open(path, "w") as f:
                f.write(changed)


def write_registry(version, archive, out):
    """What a module registry serves for the package: service discovery, the versions list (every
    version packaged into this tree), the package, and per version the package's location."""
    registry = os.path.join(out, "registry")
    os.makedirs(os.path.join(registry, ".well-known"), exist_ok=True)
    with open(os.path.join(registry, ".well-known", "terraform.json"), "w") as f:
        json.dump({"modules.v1": "/v1/modules/"}, f)
    files = os.path.join(registry, "files")
    os.makedirs(files, exist_ok=True)
    shutil.copyfile(archive, os.path.join(files, os.path.basename(archive)))
    package = os.path.join(registry, "v1", "modules", *MODULE_PACKAGE)
    os.makedirs(os.path.join(package, version), exist_ok=True)
    with open(os.path.join(package, version, "download"), "w") as f:
        f.write(f"/files/{os.path.basename(archive)}\n")
    versions = sorted(v for v in os.listdir(package) if os.path.isdir(os.path.join(package, v)))
    with open(os.path.join(package, "versions"), "w") as f:
        json.dump({"modules": [{"versions": [{"version": v} for v in versions]}]}, f, indent=2)
        f.write("\n")
    return registry


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def h1_hash(zip_path):
    """Terraform's package hash (Go's dirhash Hash1 over the archive's files)."""
    lines = []
    with zipfile.ZipFile(zip_path) as z:
        for name in sorted(i.filename for i in z.infolist() if not i.is_dir()):
            lines.append(f"{hashlib.sha256(z.read(name)).hexdigest()}  {name}\n")
    summary = hashlib.sha256("".join(lines).encode()).digest()
    return "h1:" + base64.b64encode(summary).decode()


def write_zip(binary, version, zip_path):
    """The archive holds one executable named as Terraform's plugin discovery expects."""
    info = zipfile.ZipInfo(f"{NAME}_v{version}", date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o100755 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    with open(binary, "rb") as f, zipfile.ZipFile(zip_path, "w") as z:
        z.writestr(info, f.read())


def sign(sums_path, gpg_key):
    sig = sums_path + ".sig"
    if os.path.exists(sig):
        os.remove(sig)
    result = subprocess.run(
        ["gpg", "--batch", "--yes", "--local-user", gpg_key, "--detach-sign", "--output", sig, sums_path],
        capture_output=True, text=True)
    if result.returncode != 0:
        raise ReleaseError(f"gpg could not sign {sums_path} with key {gpg_key!r}: {result.stderr.strip()}")
    return sig


def write_release(version, binaries, out, gpg_key):
    rel = os.path.join(out, "release", version)
    os.makedirs(rel, exist_ok=True)
    files = []
    for platform, binary in sorted(binaries.items()):
        zip_path = os.path.join(rel, f"{NAME}_{version}_{platform}.zip")
        write_zip(binary, version, zip_path)
        files.append(zip_path)
    manifest = os.path.join(rel, f"{NAME}_{version}_manifest.json")
    with open(manifest, "w") as f:
        json.dump({"version": 1, "metadata": {"protocol_versions": PROTOCOL_VERSIONS}}, f, indent=2)
        f.write("\n")
    files.append(manifest)
    sums = os.path.join(rel, f"{NAME}_{version}_SHA256SUMS")
    with open(sums, "w") as f:
        for path in sorted(files):
            f.write(f"{sha256_file(path)}  {os.path.basename(path)}\n")
    if gpg_key:
        sign(sums, gpg_key)
    return rel


def update_mirror(version, rel, out):
    """Adds this version's archives to the mirror tree and rewrites its indexes."""
    mirror = os.path.join(out, "mirror", *ADDRESS)
    os.makedirs(mirror, exist_ok=True)
    archives = {}
    prefix = f"{NAME}_{version}_"
    for name in sorted(os.listdir(rel)):
        platform = name[len(prefix):-len(".zip")] if name.startswith(prefix) and name.endswith(".zip") else None
        if not platform or not PLATFORM_RE.match(platform):
            continue
        dest = os.path.join(mirror, name)
        if os.path.exists(dest):
            os.remove(dest)
        shutil.copyfile(os.path.join(rel, name), dest)
        archives[platform] = {"url": name, "hashes": [h1_hash(dest)]}
    with open(os.path.join(mirror, f"{version}.json"), "w") as f:
        json.dump({"archives": archives}, f, indent=2)
        f.write("\n")
    versions = sorted(n[:-len(".json")] for n in os.listdir(mirror)
                      if n.endswith(".json") and n != "index.json")
    with open(os.path.join(mirror, "index.json"), "w") as f:
        json.dump({"versions": {v: {} for v in versions}}, f, indent=2)
        f.write("\n")
    return mirror


# What each platform's binaries are: (magic at offset 0, offset of the machine field, its size,
# the machine per architecture). ELF's e_machine and Mach-O's cputype; Windows' PE is not read.
EXECUTABLE_FORMATS = {
    "linux": (b"\x7fELF", 18, 2, {"amd64": 0x3E, "arm64": 0xB7, "386": 0x03, "arm": 0x28}),
    "freebsd": (b"\x7fELF", 18, 2, {"amd64": 0x3E, "arm64": 0xB7, "386": 0x03, "arm": 0x28}),
    "darwin": (b"\xcf\xfa\xed\xfe", 4, 4, {"amd64": 0x01000007, "arm64": 0x0100000C}),
}


def check_architecture(platform, path):
    """Refuses a binary built for another platform than the one it would be published as: a
    package under the wrong name installs everywhere and starts nowhere."""
    os_name, arch = platform.split("_", 1)
    fmt = EXECUTABLE_FORMATS.get(os_name)
    if fmt is None:
        return
    magic, offset, size, machines = fmt
    with open(path, "rb") as f:
        head = f.read(offset + size)
    if not head.startswith(magic) or len(head) < offset + size:
        raise ReleaseError(f"--binary {platform}={path}: not a {os_name} executable")
    machine = int.from_bytes(head[offset:offset + size], "little")
    names = {v: k for k, v in machines.items()}
    if machine != machines.get(arch):
        built = names.get(machine, f"machine {machine:#x}")
        raise ReleaseError(f"--binary {platform}={path}: built for {os_name}_{built}, not {platform}; "
                           f"build it with the platform's Rust target (PLATFORMS={platform} make release)")


def parse_binaries(specs):
    binaries = {}
    for spec in specs:
        platform, sep, path = spec.partition("=")
        if not sep or not PLATFORM_RE.match(platform):
            raise ReleaseError(f"--binary {spec!r}: write <os>_<arch>=<path>, e.g. linux_amd64=target/release/{NAME}")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise ReleaseError(f"--binary {spec!r}: {path} is not an executable file")
        if platform in binaries:
            raise ReleaseError(f"--binary: {platform} is given twice")
        check_architecture(platform, path)
        binaries[platform] = path
    return binaries


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", required=True, help="the release version, e.g. 0.1.0 (no leading v)")
    p.add_argument("--binary", action="append", required=True, metavar="OS_ARCH=PATH",
                   help="a built provider for one platform; repeat per platform")
    p.add_argument("--out", required=True, help="the folder to write release/ and mirror/ into")
    sig = p.add_mutually_exclusive_group(required=True)
    sig.add_argument("--gpg-key", help="the id of the key (in gpg's keyring) that signs the SHA256SUMS")
    sig.add_argument("--unsigned", action="store_true", help="no signature: good for mirrors, not for a registry")
    args = p.parse_args(argv)
    try:
        if not VERSION_RE.match(args.version):
            raise ReleaseError(f"--version {args.version!r}: write a semantic version such as 0.1.0, without a leading v")
        binaries = parse_binaries(args.binary)
        rel = write_release(args.version, binaries, args.out, args.gpg_key)
        mirror = update_mirror(args.version, rel, args.out)
        archive = package_modules(args.version, args.out)
        registry = write_registry(args.version, archive, args.out)
    except (ReleaseError, OSError) as e:
        print(f"release: {e}", file=sys.stderr)
        return 1
    print(f"release {args.version}: {rel}")
    print(f"mirror: {os.path.join(args.out, 'mirror')} ({mirror})")
    print(f"modules: {archive} ({'/'.join(MODULE_PACKAGE)}; registry files: {registry})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
