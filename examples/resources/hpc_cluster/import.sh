# A cluster is imported by its name.
terraform import hpc_cluster.example research
