package daemon

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// notifyPath is $NOTIFY_SOCKET as the process started with. It is taken
// out of the environment, so nothing the daemon starts (git) can speak to
// the service manager for it.
var notifyPath = func() string {
	p := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	return p
}()

// notify tells the service manager about the daemon's state (systemd's
// Type=notify protocol): one datagram to the socket in notifyPath, which
// may name an abstract socket ("@..."). Without one, it does nothing.
func notify(state string) error {
	path := notifyPath
	if path == "" {
		return nil
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	return nil
}
