// Command skillfs keeps a catalog of agent skills and serves each agent
// session the skills it may read as a read-only FUSE filesystem.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
