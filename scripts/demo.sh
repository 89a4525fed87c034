#!/usr/bin/env bash
# make demo / make demo-destroy: examples/quickstart (network, Lustre, a cluster with a CPU and a
# GPU partition) against the local AWS emulator.
#
# As root with the boot-mode tools, the emulator boots real machines (its local EC2): the image is
# baked from image-builder/templates/debian-slurm.pkr.hcl (once; reused while its inputs are
# older) and published, the cluster comes alive, a demo user SSHes to the login node and runs a
# job, and the cluster stays up until `make demo-destroy`. Otherwise the emulator answers the API
# only: the demo applies, prints the rendered slurm.conf and, where Debian's Slurm is installed,
# runs it in a slurmctld on loopback.
# Usage: scripts/demo.sh up|down <folder holding terraform-provider-hpc, hpc-image and hpc-node>
set -euo pipefail
action=${1:?usage: demo.sh up|down BIN_DIR}
provider_dir=${2:?usage: demo.sh up|down BIN_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
state="${HPCFORGE_DEMO_DIR:-$root/.demo}"
example="$root/examples/quickstart"
venv_python="$root/acceptance-tests/emulator/.venv/bin/python"
image_dir="${HPCFORGE_TEST_IMAGE_DIR:-/var/tmp/hpcforge-test-image}/debian"
template="$root/image-builder/templates/debian-slurm.pkr.hcl"
demo_user=demo
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
unset AWS_PROFILE AWS_REGION

SSH_OPTIONS=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=5 -o LogLevel=ERROR)

# What booting machines needs that this host lacks (empty: boot mode).
boot_missing() {
  local missing="" tool
  [ "$(id -u)" = 0 ] || missing="root (namespaces, mounts, systemd-nspawn)"
  for tool in systemd-nspawn:systemd-container dnsmasq:dnsmasq-base iptables-restore:iptables \
              ssh:openssh-client ssh-keygen:openssh-client debootstrap:debootstrap; do
    command -v "${tool%%:*}" >/dev/null || [ -x "/usr/sbin/${tool%%:*}" ] \
      || missing="$missing${missing:+, }${tool%%:*} (apt-get install ${tool#*:})"
  done
  for tool in hpc-image hpc-node; do
    [ -x "$provider_dir/$tool" ] || missing="$missing${missing:+, }$provider_dir/$tool (make build)"
  done
  echo "$missing"
}

emulator_running() {
  [ -f "$state/emulator.pid" ] && kill -0 "$(cat "$state/emulator.pid")" 2>/dev/null
}

# start_emulator [serve's flags...]
start_emulator() {
  if emulator_running; then return; fi
  rm -f "$state/emulator.port"
  nohup "$root/acceptance-tests/emulator/serve" --port 0 --port-file "$state/emulator.port" "$@" \
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

# tf_quiet apply|destroy [flags...]: the command's output only when it fails.
tf_quiet() {
  local out
  if ! out=$(tf "$@" -auto-approve -input=false -var-file="$state/demo.tfvars.json" 2>&1); then
    echo "$out" >&2
    echo "terraform $1 failed; the emulator's log: $state/emulator.log" >&2
    exit 1
  fi
  grep -E '^(Apply|Destroy)' <<<"$out" || true
}

output() {
  terraform -chdir="$example" output -state="$state/terraform.tfstate" -no-color "$@"
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

# The disk baked from the repo's template, rebaked when an input is newer (shared with the
# booted tests: /var/tmp/hpcforge-test-image, under the lock they take, since they may run beside
# the demo). Called in a command substitution: the lock goes with its subshell.
image_disk() {
  local disk="$image_dir/disk.raw" lock
  mkdir -p "$(dirname "$image_dir")"
  exec {lock}>"$image_dir.lock"
  flock "$lock"
  if [ -f "$disk" ] && [ -z "$(find "$template" "$root/image-builder/components" "$provider_dir/hpc-image" \
      "$provider_dir/hpc-node" -newer "$disk" -print -quit)" ]; then
    echo "$disk"; return
  fi
  echo "== baking the node image (the first time takes about 4 minutes; log: $state/bake.log)" >&2
  mkdir -p "$image_dir"
  if ! (cd "$root/image-builder" && HPC_NODE_BINARY="$provider_dir/hpc-node" "$provider_dir/hpc-image" build \
        "$template" -var verify=false --cache-dir "${HPC_IMAGE_CACHE:-/var/tmp/hpc-image-cache}" \
        --output "$image_dir") > "$state/bake.log" 2>&1; then
    tail -30 "$state/bake.log" >&2; exit 1
  fi
  echo "$disk"
}

# hpc-image publish to the emulator; prints the AMI.
publish_image() {
  local manifest="$state/manifest.json"
  if ! (cd "$root/image-builder" && HPC_NODE_BINARY="$provider_dir/hpc-node" "$provider_dir/hpc-image" publish \
        "$template" --disk "$1" --manifest "$manifest" -var 'regions=["us-east-1"]') > "$state/publish.log" 2>&1; then
    cat "$state/publish.log" >&2; exit 1
  fi
  grep -o 'ami-[0-9a-f]*' "$manifest" | head -1
}

aws_demo() { "$venv_python" "$root/scripts/demo-aws.py" "$@"; }

# The key pair and node role the quickstart's variables name, and the demo user (the cluster
# makes its own EFS for /home).
boot_inputs() {
  local ami=$1 profile
  aws_demo key-pair demo "$state/demo-key"
  profile=$(aws_demo node-role demo-node)
  python3 - "$ami" "$profile" "$(ssh-keygen -y -f "$state/demo-key")" "$demo_user" > "$state/demo.tfvars.json" <<'PY2'
import json, sys
ami, profile, key, user = sys.argv[1:]
print(json.dumps({
    "ami_id": ami, "instance_profile_arn": profile,
    "key_name": "demo", "allowed_ssh_cidrs": ["10.0.0.0/16"],
    # The default template's image carries Debian 12's Slurm; each booted node gets the host's cores.
    "slurm_version": "22.05", "cpu_instance_type": "c7i.large",
    "users": [{"name": user, "uid": 2001, "ssh_public_keys": [key]}],
}, indent=2))
PY2
}

# How this host reaches the login node: directly, or inside the VPC's client namespace when the
# emulator did not route the VPC from the host (its CIDR overlaps a network the host uses).
reach=()
find_reach() {
  local namespace
  namespace=$(curl -sf "$AWS_ENDPOINT_URL/_emulator/instances" | python3 -c '
import json, sys
found = [m["ClientNamespace"] for m in json.load(sys.stdin)["instances"] if m["PrivateIpAddress"] == sys.argv[1]]
print(next((n for n in found if n), ""))' "$1")
  reach=()
  if [ -n "$namespace" ]; then reach=(ip netns exec "$namespace"); fi
}

as_user() { "${reach[@]}" ssh -i "$state/demo-key" "${SSH_OPTIONS[@]}" "$demo_user@$1" "$2"; }

# Waits up to $2 seconds for `as_user $login "$3"` to print a line matching $1.
wait_for() {
  local pattern=$1 limit=$2 command=$3 deadline=$(( $(date +%s) + $2 )) got=""
  while [ "$(date +%s)" -lt "$deadline" ]; do
    got=$(as_user "$login" "$command" 2>&1 || true)
    grep -Eq "$pattern" <<<"$got" && return 0
    sleep 2
  done
  echo "not within ${limit}s: $command printed:" >&2; echo "$got" >&2
  return 1
}

boot_up() {
  local start disk ami job
  start=$(date +%s)
  start_emulator --boot-instances --machine-budget 4 --boot-dir "$state/boot" --snapshot-delay 0 --image-delay 0
  export AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$state/emulator.port")"
  echo "== emulator on $AWS_ENDPOINT_URL booting real machines (systemd-nspawn) from the AMIs"
  disk=$(image_disk)
  ami=$(publish_image "$disk")
  echo "== published $disk as $ami"
  boot_inputs "$ami"
  echo "== terraform apply examples/quickstart (the head node boots)"
  # The role's policy is a cluster output, known once the cluster is planned: the cluster first
  # without waiting, then the policy, then everything, waiting until the head reports ready.
  tf_quiet apply -target=hpc_cluster.this -var wait_for_ready=false
  output -raw instance_profile_policy > "$state/policy.json"
  aws_demo role-policy demo-node "$state/policy.json"
  tf_quiet apply
  echo "== applied in $(( $(date +%s) - start ))s: the head node runs slurmctld and slurmdbd"
  login=$(output -json login_node_private_ips | python3 -c 'import json,sys; print(json.load(sys.stdin)[0])')
  find_reach "$login"
  wait_for "^ok$" 120 "echo ok" || exit 1
  echo "== $demo_user@$login: sinfo"
  as_user "$login" sinfo
  echo "== $demo_user@$login: sbatch (the CPU partition starts a node)"
  job=$(as_user "$login" "sbatch --parsable -N1 -o demo-%j.out --wrap 'echo hello from \$(hostname); srun uname -sr'")
  echo "job $job"
  wait_for "JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)" 300 "scontrol show job $job -o" || exit 1
  echo "== demo-$job.out"
  as_user "$login" "cat demo-$job.out"
  echo "== sacct"
  wait_for "^$job\\|" 60 "sacct -n -X -P -j $job -o JobID,User,Account,Partition,State,NodeList,Elapsed" || exit 1
  as_user "$login" "sacct -X -j $job -o JobID,User,Account,Partition,State,NodeList,Elapsed"
  echo "== up in $(( $(date +%s) - start ))s"
  echo
  echo "The cluster stays up. Log in:  ${reach[*]}${reach[*]:+ }ssh -i $state/demo-key $demo_user@$login"
  echo "Tear down with: make demo-destroy"
}

api_up() {
  local out start
  start_emulator
  export AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$state/emulator.port")"
  echo "== emulator on $AWS_ENDPOINT_URL (moto, no AWS account needed)"
  python3 -c 'import json,sys; print(json.dumps({"ami_id": sys.argv[1], "wait_for_ready": False}))' \
    "$(demo_ami)" > "$state/demo.tfvars.json"
  echo "== terraform apply examples/quickstart"
  start=$(date +%s)
  tf_quiet apply
  echo "== applied in $(( $(date +%s) - start ))s"
  echo
  summary
  live_slurm
  echo
  echo "Tear down with: make demo-destroy"
}

case "$action" in
  up)
    if emulator_running; then
      echo "a demo is running: make demo-destroy first" >&2; exit 1
    fi
    # State left by a demo whose emulator is gone describes nothing that exists.
    rm -rf "$state/terraform.tfstate" "$state/terraform.tfstate.backup" "$state/boot"
    missing=$(boot_missing)
    if [ -z "$missing" ]; then
      boot_up
    else
      echo "== not booting machines, this host lacks: $missing"
      echo "== (the emulator answers the API only; nothing boots, no job runs)"
      api_up
    fi
    ;;
  down)
    if [ -f "$state/terraform.tfstate" ] && emulator_running; then
      export AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$state/emulator.port")"
      tf_quiet destroy
    fi
    if emulator_running; then
      kill "$(cat "$state/emulator.pid")"
      # The emulator ends its machines on SIGTERM; wait for it so nothing outlives the demo.
      for _ in $(seq 1 300); do emulator_running || break; sleep 0.1; done
    fi
    rm -rf "$state"
    echo "demo torn down"
    ;;
  *)
    echo "usage: demo.sh up|down BIN_DIR" >&2; exit 2 ;;
esac
