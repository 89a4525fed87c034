# Import a connection requested from the provider's region by its id. The groups it opened are
# not recorded by EC2: the configuration's are admitted again on the next apply (already there).
terraform import hpc_network_peering.west pcx-0123456789abcdef0
