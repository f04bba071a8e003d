package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// notifyPath is $NOTIFY_SOCKET as the process started with. It is taken
// out of the environment, so nothing the daemon starts (git) can speak to
// the service manager for it.
var notifyPath = func() string {
	p := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	return p
}()

// watchdogEvery is how often the service manager wants to hear that the
// daemon is alive ($WATCHDOG_USEC, for this process when $WATCHDOG_PID says
// so), or 0. Like NOTIFY_SOCKET, both are taken out of the environment.
var watchdogEvery = func() time.Duration {
	usec, pid := os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID")
	os.Unsetenv("WATCHDOG_USEC")
	os.Unsetenv("WATCHDOG_PID")
	if pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	n, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || n == 0 {
		return 0
	}
	return time.Duration(n) * time.Microsecond
}()

// watchdog sends WATCHDOG=1 twice per watchdogEvery for as long as the mount
// answers (the check readiness makes, bounded by readyTimeout), until ctx
// ends. A mount that stops answering stops the pings, so the service manager
// restarts the daemon, which mounts again and re-attaches the binds. The
// index and the store are left out of that: a restart mends neither a full
// disk nor a broken one (/v1/ready reports those). Index files removed or
// replaced under the daemon (see checkIndexFiles) are told instead, in the
// log and in the status the service manager shows, with the pings going on:
// the watchdog's abort would lose what the daemon wrote since, which only a
// clean stop saves.
func (d *Daemon) watchdog(ctx context.Context, every time.Duration, log *slog.Logger) {
	if every <= 0 || notifyPath == "" {
		return
	}
	log.Info("service manager watchdog", "every", every)
	told := "" // the index problem last told, "" for none
	periodically(ctx, every/2, func() {
		if c := d.check("mount", &d.watchBusy.mount, d.checkMount); !c.OK {
			log.Warn("watchdog withheld: the mount does not answer", "err", c.Error)
			return
		}
		state := "WATCHDOG=1"
		problem := d.check("index", &d.watchBusy.index, d.checkIndexFiles).Error // a check that hangs is told too
		switch {
		case problem != "" && problem != told:
			log.Error("the index's files could not be checked, or are not those the daemon has open", "err", problem)
			state += "\nSTATUS=NOT READY: index: " + problem
		case problem == "" && told != "":
			state += "\nSTATUS=serving " + d.mountRoot
		}
		told = problem
		if err := notify(state); err != nil {
			log.Warn("watchdog", "err", err)
		}
	})
}

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

// Notify tells the service manager state, as the daemon does (for the
// other long-running commands: `skillfs keeper`).
func Notify(state string) error { return notify(state) }
