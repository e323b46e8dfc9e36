// A STAND-IN for GKE's gcsfuse CSI driver on the node tier's node: registered with the kubelet
// under gcsfuse's driver name (gcsfuse.csi.storage.gke.io), it mounts a bucket's ephemeral inline
// volume as a bind mount of one directory per bucket name (<buckets>/<bucketName>), shared by
// every pod that mounts that bucket, as the bucket is on GKE. What gcsfuse itself does (GCS's
// API, its caches, its sidecar) is not here: only the kubelet's side of the driver is real.
//
//	bucket-csi --driver-name gcsfuse.csi.storage.gke.io --kubelet-dir DIR --buckets DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// A bucket name as GCS allows it (lowercase letters, digits, -, _ and .): never a path.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	name, node, buckets string
	uid, gid            int
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "stand-in"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.node}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// mounted says whether path is a mount point, from the kernel's own table: a bind mount of a
// directory on the same filesystem has the same device, so stat cannot tell.
func mounted(path string) bool {
	table, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(table), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && unescape(fields[4]) == path {
			return true
		}
	}
	return false
}

// unescape undoes mountinfo's octal escapes (a space is \040).
func unescape(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	bucket := req.GetVolumeContext()["bucketName"]
	if !bucketName.MatchString(bucket) {
		return nil, status.Errorf(codes.InvalidArgument, "volumeAttributes.bucketName %q is not a bucket name", bucket)
	}
	target := req.GetTargetPath()
	source := filepath.Join(d.buckets, bucket)
	for _, dir := range []string{source, target} {
		if err := os.MkdirAll(dir, 0o775); err != nil {
			return nil, status.Errorf(codes.Internal, "mkdir %s: %v", dir, err)
		}
	}
	// gcsfuse's uid/gid mount options: the files belong to the pod's user.
	if err := os.Chown(source, d.uid, d.gid); err != nil {
		return nil, status.Errorf(codes.Internal, "chown %s: %v", source, err)
	}
	if mounted(target) { // the kubelet republishes (requiresRepublish): already there
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s on %s: %v", source, target, err)
	}
	log.Printf("published bucket %s at %s", bucket, target)
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	for mounted(target) { // every bind stacked on it (a republish before this check existed)
		if err := unix.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	// Only the empty mount point: never the bucket's files through a mount still there.
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return nil, status.Errorf(codes.Internal, "remove %s: %v", target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// The kubelet's plugin registration (pluginregistration/v1): it finds the driver's socket.
type registrar struct {
	registration.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{Type: registration.CSIPlugin, Name: r.name, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		log.Printf("the kubelet refused the driver: %s", s.Error)
	}
	return &registration.RegistrationStatusResponse{}, nil
}

func serve(path string, register func(*grpc.Server)) {
	_ = os.Remove(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		log.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		log.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { log.Fatal(s.Serve(l)) }()
}

func main() {
	name := flag.String("driver-name", "gcsfuse.csi.storage.gke.io", "the CSI driver's name")
	kubeletDir := flag.String("kubelet-dir", "/var/lib/kubelet", "the kubelet's root directory")
	buckets := flag.String("buckets", "", "the directory that holds one directory per bucket")
	node := flag.String("node", "", "the node's name")
	uid := flag.Int("uid", 1000, "the owner of a bucket's directory (gcsfuse's uid= option)")
	gid := flag.Int("gid", 1000, "its group (gid=)")
	flag.Parse()
	if *buckets == "" || *node == "" {
		log.Fatal("--buckets and --node are required")
	}
	endpoint := filepath.Join(*kubeletDir, "plugins", *name, "csi.sock")
	d := &driver{name: *name, node: *node, buckets: *buckets, uid: *uid, gid: *gid}
	serve(endpoint, func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, d)
		csi.RegisterNodeServer(s, d)
	})
	r := &registrar{name: *name, endpoint: endpoint}
	serve(filepath.Join(*kubeletDir, "plugins_registry", fmt.Sprintf("%s-reg.sock", *name)), func(s *grpc.Server) {
		registration.RegisterRegistrationServer(s, r)
	})
	log.Printf("%s (stand-in) serving at %s", *name, endpoint)
	select {}
}
