# A network is imported by its VPC id.
terraform import hpc_network.example vpc-0123456789abcdef0
