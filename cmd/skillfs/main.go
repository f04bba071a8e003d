// Command skillfs keeps a catalog of agent skills and serves each agent
// session the skills it may read as a read-only FUSE filesystem.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT or SIGTERM cancels the command: git and other children are
	// killed and temporary files removed as it unwinds. Once it is
	// cancelled a second signal has its default effect, so a hung unwind
	// can still be interrupted (serve counts signals itself).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
