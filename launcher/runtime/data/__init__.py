"""`data prepare` as a Ray job on the cluster."""
