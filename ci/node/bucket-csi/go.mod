module tpu-stack.local/ci/node/bucket-csi

go 1.26.0

require (
	github.com/container-storage-interface/spec v1.11.0
	golang.org/x/sys v0.50.0
	google.golang.org/grpc v1.85.0
	k8s.io/kubelet v0.35.0
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
