"""What runs on a user's workstation: submit/logs/status/stop over Ray's job API, the local Ray
cluster, reaching a Helm release. Needs only the package's own light dependencies, except where
a command says it needs the training stack (the local cluster, preflight, data prepare)."""
