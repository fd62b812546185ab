"""The HyperPod lifecycle script ``infra/lifecycle/on_create.sh``, run for real with bash in a sandbox directory tree.

Every path the script touches is redirected into ``tmp_path`` through its ``HPDPD_*`` settings, and the system tools
it calls (systemctl, mountpoint, rsync, nvidia-smi, fi_info) are fakes that record their calls. The fake rsync hands
the copy to the real rsync, so the tests that copy data need rsync installed (they are skipped, saying so, without it).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.paths import ROOT

SCRIPT = ROOT / "infra" / "lifecycle" / "on_create.sh"
REAL_RSYNC = shutil.which("rsync")
needs_rsync = pytest.mark.skipif(REAL_RSYNC is None, reason="rsync is not installed (apt-get install -y rsync); "
                                                            "the fake rsync hands the copy to the real one")

FAKE_SYSTEMCTL = r"""#!/bin/bash
echo "systemctl $*" >>"$FAKE_CALLS"
case $1 in
  is-active) [[ $(cat "$FAKE_STATE/$3" 2>/dev/null) == active ]] ;;
  stop) echo inactive >"$FAKE_STATE/$2" ;;
  start)
    dir=$HPDPD_CONTAINERD_DIR
    [[ $2 == kubelet ]] && dir=$HPDPD_KUBELET_DIR
    if [[ -L $dir ]]; then echo "$2 symlink $(readlink "$dir")"; else echo "$2 directory $dir"; fi >>"$FAKE_STARTS"
    if [[ -e $FAKE_STATE/$2.start-fails ]]; then echo "Job for $2.service failed" >&2; exit 1; fi
    echo active >"$FAKE_STATE/$2" ;;
  *) echo "fake systemctl: unexpected $*" >&2; exit 2 ;;
esac
"""

FAKE_MOUNTPOINT = r"""#!/bin/bash
echo "mountpoint $*" >>"$FAKE_CALLS"
[[ -e $FAKE_STATE/target-mounted ]]
"""

# FAKE_RSYNC: "" copies with the real rsync; "fail" fails like a full disk; "drop-a-file" copies and then loses a
# file of the copy; "dry-run-dirty" copies but the dry run still lists a change.
FAKE_RSYNC = r"""#!/bin/bash
echo "rsync $*" >>"$FAKE_CALLS"
dry_run=0
for arg in "$@"; do [[ $arg == --dry-run ]] && dry_run=1; done
case ${FAKE_RSYNC:-} in
  fail) echo "rsync: [receiver] write failed on \"layer.tar\": No space left on device (28)" >&2; exit 11 ;;
  dry-run-dirty) if ((dry_run)); then echo ">f+++++++++ blobs/sha256/missing"; exit 0; fi ;;
esac
"$REAL_RSYNC" "$@" || exit
if [[ ${FAKE_RSYNC:-} == drop-a-file ]] && ((dry_run == 0)); then
  dst=${*: -1}
  rm -f -- "$(find "$dst" -type f | sort | head -n 1)"
fi
"""

FAKE_NVIDIA_SMI = r"""#!/bin/bash
echo "nvidia-smi $*" >>"$FAKE_CALLS"
if [[ ${FAKE_NVIDIA_SMI:-} == fail ]]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2; exit 9
fi
for i in 0 1; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done
"""

FAKE_FI_INFO = r"""#!/bin/bash
echo "fi_info $*" >>"$FAKE_CALLS"
if [[ ${FAKE_FI_INFO:-} == no-efa ]]; then echo "fi_getinfo: -61 (No data available)" >&2; exit 1; fi
for dev in rdmap16s27 rdmap32s27; do
  printf 'provider: efa\n    fabric: efa\n    domain: %s-rdm\n    version: 122.0\n    type: FI_EP_RDM\n' "$dev"
  printf '    protocol: FI_PROTO_EFA\n'
done
"""

# PCI functions of a small GPU node: two NVIDIA 3D controllers, an NVSwitch (NVIDIA, but a bridge), an EFA device.
GPU_NODE_PCI = {"0000:53:00.0": ("0x10de", "0x030200"), "0000:64:00.0": ("0x10de", "0x030200"),
                "0000:07:00.0": ("0x10de", "0x068000"), "0000:10:1c.0": ("0x1d0f", "0x020000")}
CPU_NODE_PCI = {"0000:00:05.0": ("0x1d0f", "0x020000"), "0000:00:1f.0": ("0x1d0f", "0x010802")}

CONTAINERD_FILES = {
    "io.containerd.content.v1.content/blobs/sha256/aaaa": b"pause image layer" * 64,
    "io.containerd.content.v1.content/blobs/sha256/bbbb": b"\x00\x01dpd worker layer" * 4096,
    "io.containerd.metadata.v1.bolt/meta.db": b"bolt",
    "io.containerd.snapshotter.v1.overlayfs/snapshots/1/fs/etc/hostname": b"pause\n",
}
KUBELET_FILES = {"kubeconfig": b"apiVersion: v1\nkind: Config\n", "pki/kubelet.crt": b"-----BEGIN CERTIFICATE-----\n"}


def _write_executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _tree(root: Path) -> dict[str, bytes | str]:
    """Relative path -> content (files) or ``-> target`` (symlinks) or ``dir``, the root excluded."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = path.read_bytes()
    return out


@dataclass
class Node:
    """A sandboxed HyperPod node: the directories the script reads and writes, its settings and its fake tools."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    # -- layout -----------------------------------------------------------------------------------------------------

    @property
    def containerd(self) -> Path:
        return self.root / "var/lib/containerd"

    @property
    def kubelet(self) -> Path:
        return self.root / "var/lib/kubelet"

    @property
    def target(self) -> Path:
        return self.root / "opt/sagemaker"

    @property
    def log_dir(self) -> Path:
        return self.root / "var/log/provision"

    @property
    def state(self) -> Path:
        return self.root / "fake-state"

    @property
    def fi_info(self) -> Path:
        return self.root / "opt/amazon/efa/bin/fi_info"

    @property
    def mountinfo(self) -> Path:
        return self.root / "proc/self/mountinfo"

    # -- arranging --------------------------------------------------------------------------------------------------

    def pci(self, functions: dict[str, tuple[str, str]]) -> None:
        devices = self.root / "sys/bus/pci/devices"
        shutil.rmtree(devices, ignore_errors=True)
        for address, (vendor, klass) in functions.items():
            (devices / address).mkdir(parents=True)
            (devices / address / "vendor").write_text(vendor + "\n")
            (devices / address / "class").write_text(klass + "\n")

    def service(self, unit: str, state: str) -> None:
        (self.state / unit).write_text(state + "\n")

    def fail_start_of(self, unit: str) -> None:
        (self.state / f"{unit}.start-fails").touch()

    def unmount_target(self) -> None:
        (self.state / "target-mounted").unlink()

    # -- acting and observing ---------------------------------------------------------------------------------------

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(SCRIPT)], env={**self.env, **env}, capture_output=True, text=True,
                              timeout=120, check=False)

    def calls(self) -> list[str]:
        path = self.state / "calls.log"
        return path.read_text().splitlines() if path.exists() else []

    def calls_of(self, tool: str) -> list[str]:
        return [c for c in self.calls() if c.split()[0] == tool]

    def starts(self) -> list[str]:
        path = self.state / "starts.log"
        return path.read_text().splitlines() if path.exists() else []

    def services(self) -> dict[str, str]:
        return {u: (self.state / u).read_text().strip() for u in ("containerd", "kubelet")}

    def provisioning_log(self) -> str:
        return (self.log_dir / "provisioning.log").read_text()


@pytest.fixture
def node(tmp_path: Path) -> Node:
    """A GPU node with EFA, the target volume mounted, containerd and kubelet running with data on the root volume."""
    n = Node(tmp_path)
    fake_bin = tmp_path / "fake-bin"
    _write_executable(fake_bin / "systemctl", FAKE_SYSTEMCTL)
    _write_executable(fake_bin / "mountpoint", FAKE_MOUNTPOINT)
    _write_executable(fake_bin / "rsync", FAKE_RSYNC)
    _write_executable(fake_bin / "nvidia-smi", FAKE_NVIDIA_SMI)
    _write_executable(n.fi_info, FAKE_FI_INFO)
    n.state.mkdir()
    (n.state / "target-mounted").touch()
    n.service("containerd", "active")
    n.service("kubelet", "active")
    n.target.mkdir(parents=True)
    n.pci(GPU_NODE_PCI)
    n.mountinfo.parent.mkdir(parents=True)
    n.mountinfo.write_text("22 1 259:1 / / rw,noatime shared:1 - xfs /dev/nvme0n1p1 rw\n"
                           f"98 22 253:0 / {n.target} rw,noatime shared:40 - xfs /dev/mapper/vg.01-lv_opt rw\n")
    for rel, data in CONTAINERD_FILES.items():
        (n.containerd / rel).parent.mkdir(parents=True, exist_ok=True)
        (n.containerd / rel).write_bytes(data)
    os.link(n.containerd / "io.containerd.content.v1.content/blobs/sha256/aaaa", n.containerd / "hardlink-to-aaaa")
    (n.containerd / "io.containerd.snapshotter.v1.overlayfs/snapshots/1/fs/etc/localtime").symlink_to(
        "/usr/share/zoneinfo/UTC")
    (n.containerd / "tmpmounts").mkdir()  # an empty directory must survive the copy too
    for rel, data in KUBELET_FILES.items():
        (n.kubelet / rel).parent.mkdir(parents=True, exist_ok=True)
        (n.kubelet / rel).write_bytes(data)

    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("HPDPD_", "FAKE_"))}
    n.env = {
        **inherited,
        "PATH": f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HPDPD_LOG_DIR": str(n.log_dir),
        "HPDPD_TARGET_DIR": str(n.target),
        "HPDPD_CONTAINERD_DIR": str(n.containerd),
        "HPDPD_KUBELET_DIR": str(n.kubelet),
        "HPDPD_FI_INFO": str(n.fi_info),
        "HPDPD_PCI_DEVICES": str(tmp_path / "sys/bus/pci/devices"),
        "HPDPD_MOUNTINFO": str(n.mountinfo),
        "HPDPD_MOUNT_WAIT_SECONDS": "0",
        "HPDPD_FAILURE_FLUSH_SECONDS": "0",
        "FAKE_CALLS": str(n.state / "calls.log"),
        "FAKE_STARTS": str(n.state / "starts.log"),
        "FAKE_STATE": str(n.state),
        "REAL_RSYNC": REAL_RSYNC or "/nonexistent/rsync",
    }
    return n


def _assert_untouched(node: Node, containerd: dict[str, bytes | str], kubelet: dict[str, bytes | str]) -> None:
    """The original data is still where it was, as a real directory, with nothing moved aside."""
    for directory, before in ((node.containerd, containerd), (node.kubelet, kubelet)):
        assert directory.is_dir() and not directory.is_symlink()
        assert _tree(directory) == before
        assert not Path(f"{directory}.pre-hpdpd").exists()


# -- success ------------------------------------------------------------------------------------------------------


@needs_rsync
def test_moves_containerd_and_kubelet_data_to_the_large_volume(node: Node) -> None:
    # GIVEN a GPU node whose containerd and kubelet data (files, a hard link, a symlink, an empty dir) are on root
    containerd_before, kubelet_before = _tree(node.containerd), _tree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN it succeeds, and both directories are now symlinks to exact copies on the target volume
    assert result.returncode == 0, result.stdout + result.stderr
    assert node.containerd.is_symlink() and os.readlink(node.containerd) == str(node.target / "containerd")
    assert node.kubelet.is_symlink() and os.readlink(node.kubelet) == str(node.target / "kubelet")
    assert _tree(node.target / "containerd") == containerd_before
    assert _tree(node.target / "kubelet") == kubelet_before
    copy = node.target / "containerd"
    assert (copy / "hardlink-to-aaaa").stat().st_ino == (copy / "io.containerd.content.v1.content/blobs/sha256/aaaa").stat().st_ino
    # AND the moved-aside originals are gone only because everything succeeded
    assert not Path(f"{node.containerd}.pre-hpdpd").exists()
    assert not Path(f"{node.kubelet}.pre-hpdpd").exists()


@needs_rsync
def test_stops_kubelet_then_containerd_and_starts_them_in_reverse_on_the_new_location(node: Node) -> None:
    # GIVEN a node with containerd and kubelet running
    # WHEN the lifecycle script runs
    result = node.run()

    # THEN kubelet stops before containerd, the copy happens while both are stopped, containerd starts before kubelet
    assert result.returncode == 0, result.stdout + result.stderr
    sequence = [c for c in node.calls() if c.startswith(("systemctl stop", "systemctl start", "rsync"))]
    assert sequence[:2] == ["systemctl stop kubelet", "systemctl stop containerd"]
    assert sequence[-2:] == ["systemctl start containerd", "systemctl start kubelet"]
    assert all(c.startswith("rsync") for c in sequence[2:-2]) and len(sequence) == 8  # copy + dry run, per directory
    # AND the services start on the new location, and are running at the end
    assert node.starts() == [f"containerd symlink {node.target / 'containerd'}", f"kubelet symlink {node.target / 'kubelet'}"]
    assert node.services() == {"containerd": "active", "kubelet": "active"}
    # AND the copy preserves hard links, ACLs and xattrs, and is verified with a dry run that must report nothing
    copies = node.calls_of("rsync")
    assert copies[0] == f"rsync -aHAX --numeric-ids --delete -- {node.containerd}/ {node.target / 'containerd'}/"
    assert "--dry-run --itemize-changes" in copies[1]


@needs_rsync
def test_logs_every_step_to_stdout_and_the_provisioning_log(node: Node) -> None:
    # GIVEN a GPU node with EFA
    # WHEN the lifecycle script runs
    result = node.run()

    # THEN each of the nine steps is announced, on stdout and in /var/log/provision/provisioning.log
    assert result.returncode == 0, result.stdout + result.stderr
    steps = re.findall(r"step: (\d)/9", result.stdout)
    assert sorted(set(steps)) == [str(i) for i in range(1, 10)]
    assert node.provisioning_log() == result.stdout
    assert "copy verified (" in result.stdout and "on_create done" in result.stdout.splitlines()[-1]
    # AND the GPU and EFA inventory is recorded for support cases
    assert (node.log_dir / "efa-devices.count").read_text() == "2\n"
    assert (node.log_dir / "gpus.txt").read_text().startswith("GPU 0: NVIDIA H100")
    assert "fi_info -p efa -t FI_EP_RDM" in node.calls()


@needs_rsync
def test_running_again_changes_nothing(node: Node) -> None:
    # GIVEN a node on which the script already ran
    assert node.run().returncode == 0
    calls_before = len(node.calls())

    # WHEN it runs a second time
    result = node.run()

    # THEN it succeeds without stopping services or copying anything
    assert result.returncode == 0, result.stdout + result.stderr
    again = node.calls()[calls_before:]
    assert not [c for c in again if c.startswith(("systemctl", "rsync"))]
    assert "already on" in result.stdout
    assert _tree(node.target / "containerd")


@needs_rsync
def test_a_stale_partial_copy_on_the_target_is_mirrored_over(node: Node) -> None:
    # GIVEN a partial copy left on the target volume by an earlier failed run, with a file the source no longer has
    stale = node.target / "containerd/io.containerd.content.v1.content/blobs/sha256/stale"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"half a layer")
    containerd_before = _tree(node.containerd)

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN the copy is an exact mirror of the source (the stale file is gone) and the switch happens
    assert result.returncode == 0, result.stdout + result.stderr
    assert _tree(node.target / "containerd") == containerd_before
    assert node.containerd.is_symlink()


@needs_rsync
def test_services_that_were_not_running_are_left_stopped(node: Node) -> None:
    # GIVEN a node where kubelet has not been started yet
    node.service("kubelet", "inactive")

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN only containerd is stopped and started again; kubelet is not started by the script
    assert result.returncode == 0, result.stdout + result.stderr
    assert [c for c in node.calls() if c.startswith(("systemctl stop", "systemctl start"))] == [
        "systemctl stop containerd", "systemctl start containerd"]
    assert node.services() == {"containerd": "active", "kubelet": "inactive"}
    assert node.kubelet.is_symlink()


@needs_rsync
def test_a_missing_kubelet_directory_becomes_a_symlink_to_the_large_volume(node: Node) -> None:
    # GIVEN a node without /var/lib/kubelet yet
    shutil.rmtree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN kubelet's future state lands on the target volume
    assert result.returncode == 0, result.stdout + result.stderr
    assert node.kubelet.is_symlink() and (node.target / "kubelet").is_dir()
    assert len(node.calls_of("rsync")) == 2  # containerd only


@needs_rsync
def test_cpu_node_without_efa_is_provisioned(node: Node) -> None:
    # GIVEN a CPU node (the system group): no NVIDIA GPU on the PCI bus, and no EFA software
    node.pci(CPU_NODE_PCI)
    node.fi_info.unlink()

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN EFA is not required: the node is provisioned and the inventory records no GPU and no EFA
    assert result.returncode == 0, result.stdout + result.stderr
    assert (node.log_dir / "efa-devices.count").read_text() == "0\n"
    assert (node.log_dir / "gpus.txt").read_text() == "no NVIDIA GPU on the PCI bus\n"
    assert not node.calls_of("nvidia-smi")
    assert node.containerd.is_symlink()


# -- failures: the original data stays where it was -----------------------------------------------------------------


def test_failed_copy_leaves_the_original_data_and_restarts_the_services(node: Node) -> None:
    # GIVEN a node where rsync fails (e.g. the target volume is full)
    containerd_before, kubelet_before = _tree(node.containerd), _tree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run(FAKE_RSYNC="fail")

    # THEN it exits non-zero, naming the step, the line and the failing command, on stdout and in the log
    assert result.returncode == 11
    assert re.search(rf"ERROR in step '6/9 copy {re.escape(str(node.containerd))} to .*': line \d+: "
                     r"'\"\$HPDPD_RSYNC\" .*' exited with status 11", result.stdout)
    assert "No space left on device" in result.stdout
    assert "on_create FAILED in step '6/9 copy" in node.provisioning_log()
    # AND the original data is untouched, and the services run again on it
    _assert_untouched(node, containerd_before, kubelet_before)
    assert node.services() == {"containerd": "active", "kubelet": "active"}
    assert node.starts() == [f"containerd directory {node.containerd}", f"kubelet directory {node.kubelet}"]


@needs_rsync
def test_copy_with_missing_files_is_detected_and_the_original_kept(node: Node) -> None:
    # GIVEN a node where the copy silently loses a file
    containerd_before, kubelet_before = _tree(node.containerd), _tree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run(FAKE_RSYNC="drop-a-file")

    # THEN the verification catches it by entry count and bytes, and nothing is switched
    assert result.returncode == 1
    assert f"ERROR in step '6/9 verify the copy of {node.containerd}': copy of {node.containerd} is incomplete" in result.stdout
    assert re.search(r"source has 1\d entries, \d+ bytes, copy has \d+ entries, \d+ bytes", result.stdout)
    _assert_untouched(node, containerd_before, kubelet_before)
    assert node.services() == {"containerd": "active", "kubelet": "active"}


@needs_rsync
def test_differences_reported_by_the_rsync_dry_run_are_detected_and_the_original_kept(node: Node) -> None:
    # GIVEN a node where, after the copy, rsync still finds something to transfer
    containerd_before, kubelet_before = _tree(node.containerd), _tree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run(FAKE_RSYNC="dry-run-dirty")

    # THEN it fails in the verification step and shows what rsync reported
    assert result.returncode == 1
    assert "ERROR in step '6/9 verify the copy" in result.stdout
    assert "rsync still finds differences" in result.stdout and "blobs/sha256/missing" in result.stdout
    _assert_untouched(node, containerd_before, kubelet_before)


@needs_rsync
def test_service_that_does_not_come_back_rolls_the_switch_back(node: Node) -> None:
    # GIVEN a node where kubelet will not start on the new location
    node.fail_start_of("kubelet")
    containerd_before, kubelet_before = _tree(node.containerd), _tree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN it fails in the restart step, puts the original directories back, and restarts containerd on them
    assert result.returncode == 1
    assert "ERROR in step '8/9 start containerd and kubelet'" in result.stdout
    assert "rollback: restored original" in result.stdout
    _assert_untouched(node, containerd_before, kubelet_before)
    assert node.starts()[-2:] == [f"containerd directory {node.containerd}", f"kubelet directory {node.kubelet}"]
    # AND the verified copy stays on the target volume, where the next run mirrors over it
    assert _tree(node.target / "containerd") == containerd_before


def test_unmounted_target_volume_fails_before_touching_anything(node: Node) -> None:
    # GIVEN a node whose large volume never gets mounted
    node.unmount_target()
    containerd_before, kubelet_before = _tree(node.containerd), _tree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN it fails in the mount step, without stopping services or copying
    assert result.returncode == 1
    assert f"ERROR in step '3/9 wait for {node.target} to be mounted': {node.target} is not mounted" in result.stdout
    assert not [c for c in node.calls() if c.startswith(("systemctl stop", "rsync"))]
    _assert_untouched(node, containerd_before, kubelet_before)


def test_mount_inside_a_directory_to_move_fails_before_touching_anything(node: Node) -> None:
    # GIVEN a node where a pod volume is already mounted below /var/lib/kubelet
    secret = node.kubelet / "pods/1234/volumes/kubernetes.io~secret/token"
    node.mountinfo.write_text(node.mountinfo.read_text() + f"120 22 0:55 / {secret} rw - tmpfs tmpfs rw\n")
    containerd_before, kubelet_before = _tree(node.containerd), _tree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN it refuses to move kubelet's directory and changes nothing
    assert result.returncode == 1
    assert f"{node.kubelet} has mounts at or below it ({secret} )" in result.stdout
    assert not [c for c in node.calls() if c.startswith(("systemctl stop", "rsync"))]
    _assert_untouched(node, containerd_before, kubelet_before)


def test_leftover_from_an_earlier_run_fails_before_touching_anything(node: Node) -> None:
    # GIVEN a moved-aside containerd directory left by an interrupted earlier run
    leftover = Path(f"{node.containerd}.pre-hpdpd")
    leftover.mkdir()

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN it stops for a human to look, and keeps both directories
    assert result.returncode == 1
    assert f"{leftover} exists (left by an earlier run?)" in result.stdout
    assert leftover.is_dir() and node.containerd.is_dir() and not node.containerd.is_symlink()
    assert not node.calls_of("rsync")


@pytest.mark.parametrize(("arrange", "expected"), [
    pytest.param(lambda n: n.fi_info.unlink(), "fi_info is missing or not executable", id="fi_info-missing"),
    pytest.param(lambda n: n.env.update(FAKE_FI_INFO="no-efa"), "reports no 'efa' provider for FI_EP_RDM",
                 id="no-efa-provider"),
    pytest.param(lambda n: n.env.update(FAKE_NVIDIA_SMI="fail"),
                 "couldn't communicate with the NVIDIA driver.\n[hyperpod-dpd] ", id="nvidia-smi-fails"),
])
def test_gpu_node_without_working_efa_or_gpus_fails_before_touching_anything(node: Node, arrange, expected) -> None:
    # GIVEN a GPU node whose EFA software, EFA devices or NVIDIA driver are missing
    arrange(node)
    containerd_before, kubelet_before = _tree(node.containerd), _tree(node.kubelet)

    # WHEN the lifecycle script runs
    result = node.run()

    # THEN it fails in the inventory step (DPD needs EFA for KV transfer), before stopping or copying anything
    assert result.returncode != 0
    assert "ERROR in step '2/9 GPU and EFA inventory'" in result.stdout and expected in result.stdout
    assert not [c for c in node.calls() if c.startswith(("systemctl", "rsync", "mountpoint"))]
    _assert_untouched(node, containerd_before, kubelet_before)


def test_nvidia_smi_failure_names_the_command(node: Node) -> None:
    # GIVEN a GPU node whose NVIDIA driver does not answer
    # WHEN the lifecycle script runs
    result = node.run(FAKE_NVIDIA_SMI="fail")

    # THEN the ERR trap names the step, the line and the command with its exit status
    assert result.returncode == 9
    assert re.search(r"ERROR in step '2/9 GPU and EFA inventory': line \d+: "
                     r"'\"\$HPDPD_NVIDIA_SMI\" -L > \"\$HPDPD_LOG_DIR/gpus.txt\"' exited with status 9", result.stdout)


def test_efa_can_be_required_on_cpu_nodes_too(node: Node) -> None:
    # GIVEN a CPU node without EFA, and EFA required explicitly
    node.pci(CPU_NODE_PCI)
    node.fi_info.unlink()

    # WHEN the lifecycle script runs with HPDPD_REQUIRE_EFA=yes
    result = node.run(HPDPD_REQUIRE_EFA="yes")

    # THEN it fails for the missing EFA software
    assert result.returncode == 1
    assert f"EFA is required on this node but {node.fi_info} is missing" in result.stdout


def test_invalid_settings_are_refused(node: Node) -> None:
    # GIVEN a relative target directory
    # WHEN the lifecycle script runs
    result = node.run(HPDPD_TARGET_DIR="opt/sagemaker")

    # THEN it refuses in the first step
    assert result.returncode == 1
    assert "ERROR in step '1/9 check tools and settings': 'opt/sagemaker' must be an absolute path" in result.stdout


# -- the script itself --------------------------------------------------------------------------------------------


def test_production_defaults() -> None:
    # GIVEN the script's settings block
    defaults = dict(re.findall(r'^: "\$\{(HPDPD_\w+):=([^}]*)\}"$', SCRIPT.read_text(), flags=re.MULTILINE))

    # THEN the defaults are the HyperPod paths; fi_info is called by its absolute path (outside the default PATH)
    assert defaults == {
        "HPDPD_LOG_DIR": "/var/log/provision", "HPDPD_TARGET_DIR": "/opt/sagemaker",
        "HPDPD_CONTAINERD_DIR": "/var/lib/containerd", "HPDPD_KUBELET_DIR": "/var/lib/kubelet",
        "HPDPD_FI_INFO": "/opt/amazon/efa/bin/fi_info", "HPDPD_NVIDIA_SMI": "nvidia-smi",
        "HPDPD_SYSTEMCTL": "systemctl", "HPDPD_RSYNC": "rsync", "HPDPD_PCI_DEVICES": "/sys/bus/pci/devices",
        "HPDPD_MOUNTINFO": "/proc/self/mountinfo", "HPDPD_MOUNT_WAIT_SECONDS": "60",
        "HPDPD_FAILURE_FLUSH_SECONDS": "60", "HPDPD_REQUIRE_EFA": "auto"}
    assert "set -Eeuo pipefail" in SCRIPT.read_text()
    assert "|| true" not in SCRIPT.read_text() and "2>/dev/null ||" not in SCRIPT.read_text()


def test_bash_parses_the_script() -> None:
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None,
                    reason="shellcheck is not installed (Debian: apt-get install -y shellcheck)")
def test_shellcheck_finds_nothing() -> None:
    result = subprocess.run(["shellcheck", "--shell=bash", "--severity=style", str(SCRIPT)], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_lifecycle_directory_holds_what_hyperpod_runs() -> None:
    # GIVEN the construct that uploads the lifecycle directory to S3 and names the OnCreate script
    from hyperpod_dpd.infra.hyperpod_cluster import LIFECYCLE_DIR, ON_CREATE

    # THEN the uploaded directory is this script's directory, the OnCreate script is in it and executable, and every
    # file in it is a shell script (the package data ships lifecycle/*.sh)
    assert (LIFECYCLE_DIR / ON_CREATE).resolve() == SCRIPT.resolve()
    assert os.access(SCRIPT, os.X_OK)
    assert sorted(p.name for p in LIFECYCLE_DIR.iterdir()) == [ON_CREATE]
    assert SCRIPT.read_text().startswith("#!/bin/bash\n")
