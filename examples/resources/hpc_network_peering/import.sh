# Import a connection requested from the provider's region by its id; the groups whose rules
# admit the other side for it (their description says so) are found again.
terraform import hpc_network_peering.west pcx-0123456789abcdef0
