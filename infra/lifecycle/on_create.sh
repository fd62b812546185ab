#!/bin/bash
# HyperPod (EKS orchestrator) lifecycle script, run once as root on every new node (LifeCycleConfig.OnCreate).
#
# What it does, in order; every step logs one line to stdout and to $HPDPD_LOG_DIR/provisioning.log:
#   1. Checks its tools and settings. Nothing is changed if this fails.
#   2. GPU and EFA inventory: writes gpus.txt and efa-devices.count (the number of "provider: efa" entries that
#      fi_info reports for FI_EP_RDM) to the log directory, for comparison with the device plugins' view.
#      A GPU node (an NVIDIA display/3D controller on the PCI bus) MUST have EFA: every GPU type hyperpod-dpd
#      allows is EFA-capable, and prefill->decode KV transfer runs over EFA. So on a GPU node the script FAILS
#      (before changing anything) if nvidia-smi fails, if fi_info is missing at $HPDPD_FI_INFO, or if fi_info
#      reports no efa provider. On a CPU node (the system group) a missing fi_info or a count of 0 is only logged.
#      HPDPD_REQUIRE_EFA=auto|yes|no overrides the rule (auto: required on GPU nodes only).
#   3. Waits up to $HPDPD_MOUNT_WAIT_SECONDS for the large volume $HPDPD_TARGET_DIR (/opt/sagemaker: the secondary
#      EBS volume, with the NVMe LVM on instances that have instance storage). Every instance group hyperpod-dpd
#      creates has that volume, so it not being mounted is a failure, not a reason to fill the root volume.
#   4. Plans the move of containerd's data (/var/lib/containerd: images, incl. the pre-loaded pause image, DPD
#      worker images are >10 GB) and kubelet's (/var/lib/kubelet: kubeconfig, pod ephemeral storage, emptyDirs)
#      to $HPDPD_TARGET_DIR/containerd and $HPDPD_TARGET_DIR/kubelet. A directory that is already a symlink to
#      its target is left alone (re-running is safe); anything unexpected (a symlink elsewhere, a mount inside
#      the directory, a leftover "<dir>.pre-hpdpd" from an earlier run) stops the script before any change.
#   5. Stops kubelet, then containerd, if they are running.
#   6. Copies each directory with rsync -aHAX --numeric-ids --delete and verifies the copy: same number of
#      entries and same total bytes of regular files, and a dry-run rsync reporting nothing left to transfer.
#   7. Switches: renames the original to "<dir>.pre-hpdpd" (same filesystem, nothing is deleted) and puts a
#      symlink to the copy in its place (as AWS's published HyperPod EKS lifecycle scripts do for kubelet).
#   8. Starts containerd, then kubelet, if they were running before, and checks that they are active.
#   9. Only then removes the "<dir>.pre-hpdpd" copies.
#
# Failure: any failing command or check prints the step, line and command, exits non-zero and rolls back: the
# services are stopped, the symlinks made by this run removed, the originals renamed back, and the services that
# were running before are started again. The original data is never deleted before step 9. A partial copy on the target is left there
# (the next run mirrors over it). Before exiting, the script waits $HPDPD_FAILURE_FLUSH_SECONDS so that the
# provisioning log reaches CloudWatch.
#
# Settings (environment variables; the defaults are the production values, the variables exist so that the
# script can be tested in a sandbox without root):
#   HPDPD_LOG_DIR=/var/log/provision            HPDPD_TARGET_DIR=/opt/sagemaker
#   HPDPD_CONTAINERD_DIR=/var/lib/containerd    HPDPD_KUBELET_DIR=/var/lib/kubelet
#   HPDPD_FI_INFO=/opt/amazon/efa/bin/fi_info   HPDPD_NVIDIA_SMI=nvidia-smi
#   HPDPD_SYSTEMCTL=systemctl                   HPDPD_RSYNC=rsync
#   HPDPD_PCI_DEVICES=/sys/bus/pci/devices      HPDPD_MOUNTINFO=/proc/self/mountinfo
#   HPDPD_MOUNT_WAIT_SECONDS=60                 HPDPD_FAILURE_FLUSH_SECONDS=60
#   HPDPD_REQUIRE_EFA=auto
# Written for bash 4.2 (Amazon Linux 2) and later.
set -Eeuo pipefail

: "${HPDPD_LOG_DIR:=/var/log/provision}"
: "${HPDPD_TARGET_DIR:=/opt/sagemaker}"
: "${HPDPD_CONTAINERD_DIR:=/var/lib/containerd}"
: "${HPDPD_KUBELET_DIR:=/var/lib/kubelet}"
: "${HPDPD_FI_INFO:=/opt/amazon/efa/bin/fi_info}"
: "${HPDPD_NVIDIA_SMI:=nvidia-smi}"
: "${HPDPD_SYSTEMCTL:=systemctl}"
: "${HPDPD_RSYNC:=rsync}"
: "${HPDPD_PCI_DEVICES:=/sys/bus/pci/devices}"
: "${HPDPD_MOUNTINFO:=/proc/self/mountinfo}"
: "${HPDPD_MOUNT_WAIT_SECONDS:=60}"
: "${HPDPD_FAILURE_FLUSH_SECONDS:=60}"
: "${HPDPD_REQUIRE_EFA:=auto}"

readonly ASIDE_SUFFIX=.pre-hpdpd
RSYNC_FLAGS=(-aHAX --numeric-ids --delete)
readonly NVIDIA_VENDOR=0x10de

STEP="start"
WAS_ACTIVE=" "   # units that were running before step 5, space-separated
ROLLBACK=()      # directories switched (or being switched) to the target by this run, undone on failure

log() {
  printf '[hyperpod-dpd] %s %s\n' "$(date -u +%FT%TZ)" "$*"
}

step() {
  STEP=$1
  log "step: $STEP"
}

die() {
  log "ERROR in step '$STEP': $*"
  exit 1
}

on_err() {
  log "ERROR in step '$STEP': line $2: '$3' exited with status $1"
}

rollback() {
  local i src
  for ((i = ${#ROLLBACK[@]} - 1; i >= 0; i--)); do
    src=${ROLLBACK[i]}
    if [[ -L $src ]]; then
      rm -f -- "$src" && log "rollback: removed symlink $src"
    fi
    if [[ -e $src$ASIDE_SUFFIX && ! -e $src && ! -L $src ]]; then
      mv -- "$src$ASIDE_SUFFIX" "$src" && log "rollback: restored original $src"
    fi
    if [[ -L $src$ASIDE_SUFFIX || -e $src$ASIDE_SUFFIX ]]; then
      log "rollback: could not restore $src; the original data is in $src$ASIDE_SUFFIX"
    fi
  done
}

restore_services() {
  local unit
  for unit in containerd kubelet; do
    if [[ $WAS_ACTIVE == *" $unit "* ]] && ! "$HPDPD_SYSTEMCTL" is-active --quiet "$unit"; then
      if "$HPDPD_SYSTEMCTL" start "$unit"; then
        log "rollback: started $unit again"
      else
        log "rollback: could not start $unit"
      fi
    fi
  done
}

# Services started on the new location must not keep running while their directories are swapped back.
stop_for_rollback() {
  local unit
  for unit in kubelet containerd; do
    if "$HPDPD_SYSTEMCTL" is-active --quiet "$unit"; then
      if "$HPDPD_SYSTEMCTL" stop "$unit"; then
        log "rollback: stopped $unit"
      else
        log "rollback: could not stop $unit"
        return 1
      fi
    fi
  done
}

on_exit() {
  local rc=$?
  trap - ERR
  set +e
  if ((rc != 0)); then
    if ((${#ROLLBACK[@]} > 0)); then
      if stop_for_rollback; then
        rollback
      else
        log "rollback: directories left switched to the verified copies; originals kept as *$ASIDE_SUFFIX"
      fi
    fi
    restore_services
    log "on_create FAILED in step '$STEP' (exit status $rc); see the lines above"
    sync
    sleep "$HPDPD_FAILURE_FLUSH_SECONDS"
  fi
  exit "$rc"
}

trap 'on_err "$?" "$LINENO" "$BASH_COMMAND"' ERR
trap on_exit EXIT

mkdir -p "$HPDPD_LOG_DIR"
exec > >(tee -a "$HPDPD_LOG_DIR/provisioning.log") 2>&1
log "on_create start on ${HOSTNAME:-unknown host}"

# -- helpers -----------------------------------------------------------------------------------------------------

is_uint() {
  [[ $1 =~ ^[0-9]+$ ]]
}

# "<entries> <bytes of regular files>" of a directory tree, the directory itself excluded.
tree_summary() {
  find "$1" -mindepth 1 -printf '%y %s\n' | awk '{ n++; if ($1 == "f") b += $2 } END { printf "%d %.0f\n", n, b }'
}

# Mount points at or below a directory (a mount inside a directory would be copied as files and break the rename).
mounts_under() {
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' "$HPDPD_MOUNTINFO"
}

# "<entries> entries, <bytes> bytes" from a tree_summary.
describe() {
  echo "${1% *} entries, ${1#* } bytes"
}

nvidia_gpu_count() {
  local dev n=0
  for dev in "$HPDPD_PCI_DEVICES"/*; do
    [[ -r $dev/vendor && -r $dev/class ]] || continue
    if [[ $(<"$dev/vendor") == "$NVIDIA_VENDOR" && $(<"$dev/class") == 0x03* ]]; then
      n=$((n + 1))
    fi
  done
  echo "$n"
}

# -- 1. tools and settings ---------------------------------------------------------------------------------------

step "1/9 check tools and settings"
for tool in "$HPDPD_RSYNC" "$HPDPD_SYSTEMCTL" mountpoint find awk realpath readlink; do
  command -v "$tool" >/dev/null 2>&1 || die "required tool '$tool' not found (PATH=$PATH)"
done
is_uint "$HPDPD_MOUNT_WAIT_SECONDS" || die "HPDPD_MOUNT_WAIT_SECONDS must be a whole number, got '$HPDPD_MOUNT_WAIT_SECONDS'"
is_uint "$HPDPD_FAILURE_FLUSH_SECONDS" || die "HPDPD_FAILURE_FLUSH_SECONDS must be a whole number, got '$HPDPD_FAILURE_FLUSH_SECONDS'"
case $HPDPD_REQUIRE_EFA in
  auto | yes | no) ;;
  *) die "HPDPD_REQUIRE_EFA must be auto, yes or no, got '$HPDPD_REQUIRE_EFA'" ;;
esac
for dir in "$HPDPD_TARGET_DIR" "$HPDPD_CONTAINERD_DIR" "$HPDPD_KUBELET_DIR"; do
  [[ $dir == /* && $dir != / ]] || die "'$dir' must be an absolute path below /"
done
[[ -d $HPDPD_PCI_DEVICES ]] || die "cannot look for GPUs: $HPDPD_PCI_DEVICES is not a directory"
[[ -r $HPDPD_MOUNTINFO ]] || die "cannot read the mount table $HPDPD_MOUNTINFO"

# -- 2. GPU and EFA inventory ------------------------------------------------------------------------------------

step "2/9 GPU and EFA inventory"
gpus=$(nvidia_gpu_count)
if ((gpus > 0)); then
  log "GPU node: $gpus NVIDIA GPU(s) on the PCI bus"
  command -v "$HPDPD_NVIDIA_SMI" >/dev/null 2>&1 || die "GPU node without '$HPDPD_NVIDIA_SMI' (NVIDIA driver not installed?)"
  "$HPDPD_NVIDIA_SMI" -L >"$HPDPD_LOG_DIR/gpus.txt"
  listed=$(awk '/^GPU / { n++ } END { print n + 0 }' "$HPDPD_LOG_DIR/gpus.txt")
  log "nvidia-smi lists $listed GPU(s); see $HPDPD_LOG_DIR/gpus.txt"
else
  log "CPU node: no NVIDIA GPU on the PCI bus"
  echo "no NVIDIA GPU on the PCI bus" >"$HPDPD_LOG_DIR/gpus.txt"
fi

case $HPDPD_REQUIRE_EFA in
  yes) efa_required=1 ;;
  no) efa_required=0 ;;
  *) efa_required=$((gpus > 0 ? 1 : 0)) ;;
esac
efa_count=0
if [[ ! -x $HPDPD_FI_INFO ]]; then
  ((efa_required == 0)) || die "EFA is required on this node but $HPDPD_FI_INFO is missing or not executable (EFA software not installed?)"
  log "$HPDPD_FI_INFO not found; EFA not required on this node"
elif fi_out=$("$HPDPD_FI_INFO" -p efa -t FI_EP_RDM 2>&1); then
  efa_count=$(awk '/provider: efa/ { n++ } END { print n + 0 }' <<<"$fi_out")
else
  log "$HPDPD_FI_INFO -p efa -t FI_EP_RDM failed: $(head -n 3 <<<"$fi_out" | tr '\n' ' ')"
fi
echo "$efa_count" >"$HPDPD_LOG_DIR/efa-devices.count"
if ((efa_count == 0)); then
  ((efa_required == 0)) || die "EFA is required on this node but $HPDPD_FI_INFO reports no 'efa' provider for FI_EP_RDM"
  log "no EFA provider; EFA not required on this node"
else
  log "fi_info reports $efa_count efa provider entr(y/ies) for FI_EP_RDM"
fi

# -- 3. the large volume -----------------------------------------------------------------------------------------

step "3/9 wait for $HPDPD_TARGET_DIR to be mounted"
waited=0
until mountpoint -q "$HPDPD_TARGET_DIR"; do
  if ((waited >= HPDPD_MOUNT_WAIT_SECONDS)); then
    die "$HPDPD_TARGET_DIR is not mounted after ${waited}s; the node would keep images on the small root volume"
  fi
  log "waiting for $HPDPD_TARGET_DIR to be mounted (${waited}s of ${HPDPD_MOUNT_WAIT_SECONDS}s)"
  sleep 5
  waited=$((waited + 5))
done
log "$HPDPD_TARGET_DIR is mounted"

# -- 4. plan -----------------------------------------------------------------------------------------------------

step "4/9 plan the move to $HPDPD_TARGET_DIR"
target_real=$(realpath -- "$HPDPD_TARGET_DIR")
NAMES=(containerd kubelet)
SOURCES=("$HPDPD_CONTAINERD_DIR" "$HPDPD_KUBELET_DIR")
DESTS=("$HPDPD_TARGET_DIR/containerd" "$HPDPD_TARGET_DIR/kubelet")
ACTIONS=()   # move | create | ready (already a symlink to the target)
for i in "${!NAMES[@]}"; do
  name=${NAMES[i]} src=${SOURCES[i]} dst=${DESTS[i]}
  if [[ -L $src ]]; then
    [[ $(readlink -f -- "$src") == "$(realpath -m -- "$dst")" ]] \
      || die "$src is a symlink to $(readlink -- "$src"), not to $dst; refusing to touch it"
    ACTIONS+=(ready)
    log "$name: $src already points to $dst"
    continue
  fi
  [[ ! -e $src$ASIDE_SUFFIX && ! -L $src$ASIDE_SUFFIX ]] \
    || die "$src$ASIDE_SUFFIX exists (left by an earlier run?); inspect it, then remove it or move it back"
  if [[ -e $dst && ! -d $dst ]] || [[ -L $dst ]]; then
    die "$dst exists and is not a plain directory"
  fi
  if [[ ! -e $src ]]; then
    ACTIONS+=(create)
    log "$name: $src does not exist; it will be a symlink to $dst"
    continue
  fi
  [[ -d $src ]] || die "$src exists and is not a directory"
  src_real=$(realpath -- "$src")
  case $target_real/ in
    "$src_real"/*) die "$HPDPD_TARGET_DIR is inside $src" ;;
  esac
  case $src_real/ in
    "$target_real"/*) die "$src is already inside $HPDPD_TARGET_DIR but is not a symlink" ;;
  esac
  mounts=$(mounts_under "$src_real")
  [[ -z $mounts ]] || die "$src has mounts at or below it ($(tr '\n' ' ' <<<"$mounts")); is the node already running pods?"
  ACTIONS+=(move)
  src_sum=$(tree_summary "$src")
  log "$name: $src ($(describe "$src_sum")) will move to $dst"
done

if [[ " ${ACTIONS[*]} " != *" move "* && " ${ACTIONS[*]} " != *" create "* ]]; then
  log "containerd and kubelet data are already on $HPDPD_TARGET_DIR; nothing to move"
  log "on_create done"
  exit 0
fi

# -- 5. stop services --------------------------------------------------------------------------------------------

step "5/9 stop kubelet and containerd"
for unit in kubelet containerd; do
  if "$HPDPD_SYSTEMCTL" is-active --quiet "$unit"; then
    WAS_ACTIVE="$WAS_ACTIVE$unit "
    "$HPDPD_SYSTEMCTL" stop "$unit"
    ! "$HPDPD_SYSTEMCTL" is-active --quiet "$unit" || die "$unit is still active after 'systemctl stop $unit'"
    log "stopped $unit"
  else
    log "$unit is not running"
  fi
done

# -- 6. copy and verify ------------------------------------------------------------------------------------------

for i in "${!NAMES[@]}"; do
  [[ ${ACTIONS[i]} == move ]] || continue
  name=${NAMES[i]} src=${SOURCES[i]} dst=${DESTS[i]}
  step "6/9 copy $src to $dst"
  mkdir -p -- "$dst"
  "$HPDPD_RSYNC" "${RSYNC_FLAGS[@]}" -- "$src/" "$dst/"
  step "6/9 verify the copy of $src"
  src_sum=$(tree_summary "$src")
  dst_sum=$(tree_summary "$dst")
  [[ $src_sum == "$dst_sum" ]] \
    || die "copy of $src is incomplete: source has $(describe "$src_sum"), copy has $(describe "$dst_sum"); original left in place"
  pending=$("$HPDPD_RSYNC" "${RSYNC_FLAGS[@]}" --dry-run --itemize-changes -- "$src/" "$dst/")
  [[ -z $pending ]] \
    || die "rsync still finds differences between $src and $dst; original left in place: $(head -n 10 <<<"$pending" | tr '\n' ' ')"
  log "$name: copy verified ($(describe "$dst_sum"))"
done

# -- 7. switch ---------------------------------------------------------------------------------------------------

for i in "${!NAMES[@]}"; do
  action=${ACTIONS[i]} name=${NAMES[i]} src=${SOURCES[i]} dst=${DESTS[i]}
  [[ $action != ready ]] || continue
  step "7/9 switch $src to $dst"
  mkdir -p -- "$dst"
  ROLLBACK+=("$src")
  if [[ $action == move ]]; then
    mv -T -- "$src" "$src$ASIDE_SUFFIX"
    log "$name: original kept as $src$ASIDE_SUFFIX until the services are back"
  fi
  ln -sT -- "$dst" "$src"
  [[ $(readlink -f -- "$src") == "$(realpath -- "$dst")" ]] || die "$src does not resolve to $dst after the switch"
  log "$name: $src -> $dst"
done

# -- 8. restart services -----------------------------------------------------------------------------------------

step "8/9 start containerd and kubelet"
for unit in containerd kubelet; do
  if [[ $WAS_ACTIVE == *" $unit "* ]]; then
    "$HPDPD_SYSTEMCTL" start "$unit"
    "$HPDPD_SYSTEMCTL" is-active --quiet "$unit" || die "$unit is not active after 'systemctl start $unit'"
    log "started $unit"
  else
    log "$unit was not running before; left stopped"
  fi
done
ROLLBACK=()   # committed: from here on a failure leaves the data on the target volume

# -- 9. remove the originals -------------------------------------------------------------------------------------

step "9/9 remove the moved-aside originals"
for i in "${!NAMES[@]}"; do
  [[ ${ACTIONS[i]} == move ]] || continue
  aside=${SOURCES[i]}$ASIDE_SUFFIX
  rm -rf -- "$aside"
  log "removed $aside"
done

log "on_create done"
