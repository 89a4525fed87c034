# A partition is imported by <cluster>/<partition>.
terraform import hpc_partition.example research/gpu
