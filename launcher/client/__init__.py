"""What runs on a user's workstation: submit/logs/status/stop over `ray job`, the local Ray
cluster, reaching a Helm release."""
