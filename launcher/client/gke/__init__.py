"""GKE: what a release needs (`gke plan|up|down|queue`), the image and the install."""
