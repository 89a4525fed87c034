# Facts about an instance type: vCPUs, memory, GPUs, EFA and its on-demand price.
data "hpc_instance_type" "example" {
  instance_type = "p5.48xlarge"
}

output "gpus_per_node" {
  value = "${data.hpc_instance_type.example.gpus} x ${data.hpc_instance_type.example.gpu_model}"
}
