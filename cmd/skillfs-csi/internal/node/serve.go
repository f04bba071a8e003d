package node

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

// Server is the gRPC server of d's Identity and Node services.
func (d *Driver) Server() *grpc.Server {
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(4 << 20))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	return srv
}

// Listen makes the endpoint's Unix socket (0600), replacing a socket file
// a previous run left; anything else at the path is refused.
func Listen(endpoint string) (net.Listener, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok && strings.Contains(endpoint, "://") {
		return nil, fmt.Errorf("endpoint %q: want unix://PATH", endpoint)
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("endpoint %q: want an absolute path", endpoint)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("endpoint %q: %s is there and is not a socket", endpoint, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	return l, nil
}
