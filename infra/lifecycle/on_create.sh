#!/bin/bash
# HyperPod (EKS orchestrator) lifecycle script, run once on every new node as root.
# It prepares the node for DPD serving: container and kubelet state on the large /opt/sagemaker volume
# (the secondary EBS volume / NVMe LVM that HyperPod mounts), and a provisioning log for support cases.
set -euo pipefail

LOG_DIR=/var/log/provision
mkdir -p "$LOG_DIR"
exec > >(tee -a "$LOG_DIR/provisioning.log") 2>&1
echo "[hyperpod-dpd] on_create start $(date -u +%FT%TZ) on $(hostname)"

if mountpoint -q /opt/sagemaker; then
  # Keep images (DPD worker images are >10 GB) and pod ephemeral storage off the small root volume.
  mkdir -p /opt/sagemaker/containerd /opt/sagemaker/kubelet
  if [ -d /var/lib/containerd ] && [ ! -L /var/lib/containerd ]; then
    systemctl stop containerd 2>/dev/null || true
    rsync -a /var/lib/containerd/ /opt/sagemaker/containerd/ 2>/dev/null || true
    rm -rf /var/lib/containerd
    ln -s /opt/sagemaker/containerd /var/lib/containerd
    systemctl start containerd 2>/dev/null || true
  fi
  echo "[hyperpod-dpd] container storage on /opt/sagemaker"
else
  echo "[hyperpod-dpd] /opt/sagemaker not mounted; leaving container storage on the root volume"
fi

# Record what EFA and the GPUs look like at boot, for comparison with the device plugins' view.
(fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -c "provider: efa" || echo 0) > "$LOG_DIR/efa-devices.count"
(nvidia-smi -L 2>/dev/null || true) > "$LOG_DIR/gpus.txt"

echo "[hyperpod-dpd] on_create done $(date -u +%FT%TZ)"
