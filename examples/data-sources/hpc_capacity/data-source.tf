# Where H100s can still come from: the account's P quota, what runs against it now, and how
# many more instances and GPUs that leaves, region by region.
data "hpc_capacity" "h100" {
  instance_types = ["p5.48xlarge"]
  regions        = ["us-east-1", "us-west-2"]
}

output "free_h100_gpus" {
  value = data.hpc_capacity.h100.total_free_gpus
}

output "room_by_region" {
  value = { for p in data.hpc_capacity.h100.pools : p.region => p.free_instances }
}
