#!/usr/bin/env bash
# make demo / make demo-destroy: examples/quickstart (network, Lustre, a cluster with a CPU and a
# GPU partition) against the local AWS emulator; then, where Debian's Slurm packages are installed,
# a real slurmctld on loopback runs the rendered slurm.conf and `sinfo` shows it.
# Usage: scripts/demo.sh up|down <folder holding terraform-provider-hpc>
set -euo pipefail
action=${1:?usage: demo.sh up|down PROVIDER_DIR}
provider_dir=${2:?usage: demo.sh up|down PROVIDER_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
state="$root/.demo"
example="$root/examples/quickstart"
mkdir -p "$state"

command -v terraform >/dev/null || { echo "terraform is not on PATH: install Terraform >= 1.11" >&2; exit 1; }

cat > "$state/cli.tfrc" <<CFG
provider_installation {
  dev_overrides { "hpcforge/hpc" = "$provider_dir" }
  direct {}
}
CFG
export TF_CLI_CONFIG_FILE="$state/cli.tfrc" TF_DATA_DIR="$state/tfdata" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
export AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo AWS_EC2_METADATA_DISABLED=true
unset AWS_PROFILE

emulator_running() {
  [ -f "$state/emulator.pid" ] && kill -0 "$(cat "$state/emulator.pid")" 2>/dev/null
}

start_emulator() {
  if emulator_running; then return; fi
  rm -f "$state/emulator.port"
  nohup "$root/acceptance-tests/emulator/serve" --port 0 --port-file "$state/emulator.port" \
    > "$state/emulator.log" 2>&1 &
  echo $! > "$state/emulator.pid"
  for _ in $(seq 1 100); do
    [ -s "$state/emulator.port" ] && return
    emulator_running || { cat "$state/emulator.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "the emulator did not start; see $state/emulator.log" >&2
  exit 1
}

tf() {
  terraform -chdir="$example" "$@" -state="$state/terraform.tfstate" -no-color
}

# The AMI the emulator offers (real AWS: an hpc-image AMI, see image-builder/).
demo_ami() {
  curl -sf "$AWS_ENDPOINT_URL/" -d 'Action=DescribeImages&Owner.1=amazon&Version=2016-11-15' \
    -H "Authorization: AWS4-HMAC-SHA256 Credential=demo/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0" \
    | grep -o 'ami-[0-9a-f]*' | awk 'NR == 1'
}

summary() {
  local out
  out=$(terraform -chdir="$example" output -state="$state/terraform.tfstate" -no-color -json)
  python3 - "$out" <<'PY'
import json, sys
o = {k: v["value"] for k, v in json.loads(sys.argv[1]).items()}
print(f"cluster        {o['cluster']}")
for name, p in o["partitions"].items():
    cost = p["estimated_max_hourly_cost"]
    print(f"partition      {name:<5} nodes {','.join(p['node_names'])}  max GPUs {p['max_gpus']}  "
          f"max ${cost:,.2f}/h" if cost is not None else "")
print(f"max cost       ${o['estimated_max_hourly_cost']:,.2f}/h with every node up (on-demand)")
print(f"Lustre         {o['file_system_id']}: {o['mount_command']}")
PY
  echo
  echo "== rendered slurm.conf"
  terraform -chdir="$example" output -state="$state/terraform.tfstate" -no-color -raw slurm_conf
  echo
}

# A real slurmctld on loopback with the rendered configuration (own munged, state and port).
live_slurm() {
  local missing="" pkg
  for pkg in slurmctld slurm-client munge; do dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"; done
  if [ -n "$missing" ] || [ "$(id -u)" != 0 ]; then
    echo "== skipping the live slurmctld: needs root and Debian's packages (sudo apt-get install$missing)"
    return
  fi
  local dir="$state/slurm" port=16817 conf
  rm -rf "$dir"; mkdir -p "$dir/state" "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 2>/dev/null; chmod 0400 "$dir/munge/key"
  chown -R munge:munge "$dir/munge" 2>/dev/null || true
  /usr/sbin/munged --key-file="$dir/munge/key" --socket="$dir/munge/sock" --pid-file="$dir/munge/pid" \
    --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" -f 2>/dev/null
  conf="$dir/slurm.conf"
  # The rendered file, pointed at this machine: controller on loopback, state under .demo,
  # accounting left out (no slurmdbd here); everything else exactly as rendered.
  terraform -chdir="$example" output -state="$state/terraform.tfstate" -no-color -raw slurm_conf \
    | grep -Ev '^(SlurmctldHost|SlurmctldPort|SlurmUser|StateSaveLocation|SlurmctldPidFile|SlurmctldLogFile|AuthInfo|AccountingStorage|JobAcct|JobComp)' > "$conf.body"
  { echo "SlurmctldHost=$(hostname -s)(127.0.0.1)"; echo "SlurmctldPort=$port"; echo "SlurmUser=root"
    echo "StateSaveLocation=$dir/state"; echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmctldLogFile=$dir/slurmctld.log"; echo "AuthInfo=socket=$dir/munge/sock"
    cat "$conf.body"
    # Slurm before 23.02 hides powered-down cloud nodes unless asked to show them.
    case $(slurmctld -V | cut -d' ' -f2) in 2[0-2].*) echo "PrivateData=cloud" ;; esac; } > "$conf"
  echo "== starting slurmctld $(slurmctld -V | cut -d' ' -f2) with it on 127.0.0.1:$port"
  SLURM_CONF="$conf" slurmctld -i -f "$conf"
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.2
  done
  if SLURM_CONF="$conf" sinfo; then
    echo "(every node is a powered-down CLOUD node: Slurm starts them through hpc-node when jobs arrive)"
  else
    tail -20 "$dir/slurmctld.log" >&2
  fi
  [ -f "$dir/slurmctld.pid" ] && kill "$(cat "$dir/slurmctld.pid")" 2>/dev/null || true
  [ -f "$dir/munge/pid" ] && kill "$(cat "$dir/munge/pid")" 2>/dev/null || true
}

case "$action" in
  up)
    start_emulator
    port=$(cat "$state/emulator.port")
    export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
    ami=$(demo_ami)
    echo "$ami" > "$state/ami"
    echo "== emulator on $AWS_ENDPOINT_URL (moto, no AWS account needed)"
    echo "== terraform apply examples/quickstart"
    start=$(date +%s)
    if ! out=$(tf apply -auto-approve -input=false -var "ami_id=$ami" -var wait_for_ready=false 2>&1); then
      echo "$out" >&2
      exit 1
    fi
    grep -E '^(Apply|Plan:)' <<<"$out" || true
    echo "== applied in $(( $(date +%s) - start ))s"
    echo
    summary
    live_slurm
    echo
    echo "Tear down with: make demo-destroy"
    ;;
  down)
    if [ -f "$state/terraform.tfstate" ] && emulator_running; then
      export AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$state/emulator.port")"
      if ! out=$(tf destroy -auto-approve -input=false -var "ami_id=$(cat "$state/ami")" -var wait_for_ready=false 2>&1); then
        echo "$out" >&2
        exit 1
      fi
      grep -E '^Destroy' <<<"$out" || true
    fi
    if emulator_running; then kill "$(cat "$state/emulator.pid")"; fi
    rm -rf "$state"
    echo "demo torn down"
    ;;
  *)
    echo "usage: demo.sh up|down PROVIDER_DIR" >&2; exit 2 ;;
esac
