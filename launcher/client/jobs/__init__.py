"""Jobs: checked, submitted and followed over Ray's job API (`submit`, `list`, `logs`,
`status`, `stop`), on the local cluster or a release."""
