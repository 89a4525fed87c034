#!/usr/bin/env bash
# make demo / make demo-destroy: examples/quickstart against the local AWS emulator.
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

case "$action" in
  up)
    start_emulator
    port=$(cat "$state/emulator.port")
    export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
    subnet=$(curl -sf "$AWS_ENDPOINT_URL/" -d 'Action=DescribeSubnets&Version=2016-11-15' \
      -H "Authorization: AWS4-HMAC-SHA256 Credential=demo/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0" \
      | grep -o 'subnet-[0-9a-f]*' | head -1)
    echo "$subnet" > "$state/subnet"
    echo "== emulator on $AWS_ENDPOINT_URL (moto, no AWS account needed); subnet $subnet"
    echo "== terraform apply examples/quickstart"
    start=$(date +%s)
    if ! out=$(tf apply -auto-approve -input=false -var "subnet_id=$subnet" 2>&1); then
      echo "$out" >&2
      exit 1
    fi
    grep -E '^(hpc_|Apply|Plan:)' <<<"$out" || true
    echo "== applied in $(( $(date +%s) - start ))s"
    echo
    terraform -chdir="$example" output -state="$state/terraform.tfstate" -no-color
    echo
    echo "Tear down with: make demo-destroy"
    ;;
  down)
    if [ -f "$state/terraform.tfstate" ] && emulator_running; then
      export AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$state/emulator.port")"
      if ! out=$(tf destroy -auto-approve -input=false -var "subnet_id=$(cat "$state/subnet")" 2>&1); then
        echo "$out" >&2
        exit 1
      fi
      grep -E '^(hpc_|Destroy)' <<<"$out" || true
    fi
    if emulator_running; then kill "$(cat "$state/emulator.pid")"; fi
    rm -rf "$state"
    echo "demo torn down"
    ;;
  *)
    echo "usage: demo.sh up|down PROVIDER_DIR" >&2; exit 2 ;;
esac
