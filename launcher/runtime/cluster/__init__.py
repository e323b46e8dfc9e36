"""What a pod checks and asks of its cluster: `helm test`'s checks, idle slices given back, the
pods' one Kubernetes client, the capacity a host got."""
