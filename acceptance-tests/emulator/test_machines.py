"""Pure parts of the machines (no booting): what a guest's root says about its systemd."""

from __future__ import annotations

from pathlib import Path

import machines


def _root(tmp_path: Path, where: str, library: str) -> str:
    directory = tmp_path / where
    directory.mkdir(parents=True)
    (directory / library).write_bytes(b"")
    return str(tmp_path)


def test_a_guest_whose_systemd_dropped_cgroup_v1_gets_the_unified_hierarchy(tmp_path: Path) -> None:
    forky = _root(tmp_path / "forky", "usr/lib/x86_64-linux-gnu/systemd", "libsystemd-shared-262.so")
    assert machines.guest_systemd_version(forky) == 262
    assert machines.needs_unified_cgroups(forky)
    trixie = _root(tmp_path / "trixie", "usr/lib/x86_64-linux-gnu/systemd", "libsystemd-shared-257.so")
    assert machines.guest_systemd_version(trixie) == 257
    assert not machines.needs_unified_cgroups(trixie)
    fedora = _root(tmp_path / "fedora", "usr/lib64/systemd", "libsystemd-shared-258.3-1.fc43.so")
    assert machines.guest_systemd_version(fedora) == 258
    assert machines.needs_unified_cgroups(fedora)


def test_a_root_without_systemd_keeps_nspawns_choice(tmp_path: Path) -> None:
    assert machines.guest_systemd_version(str(tmp_path)) is None
    assert not machines.needs_unified_cgroups(str(tmp_path))
