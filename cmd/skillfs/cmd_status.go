package main

import (
	"fmt"

	"strings"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/api"
)

// status prints the running daemon at a glance: where it keeps its data and
// serves, what it serves, whether it is ready and the last error it logged.
func (c *cli) statusCmd() *cobra.Command {
	cmd := leaf("status", "the running daemon at a glance: data directory, mount, readiness, sessions, catalog, last error, keeper; exit 7 when it is not running", 0, 0)
	cmd.RunE = func(*cobra.Command, []string) error {
		var st api.Status
		if err := c.call("GET", "/v1/status", nil, &st); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(st)
		}
		ready := "yes"
		if !st.Readiness.Ready {
			var why []string
			for _, ch := range st.Readiness.Checks {
				if !ch.OK {
					why = append(why, ch.Name+": "+ch.Error)
				}
			}
			ready = "NO (" + strings.Join(why, "; ") + ")"
		}
		last := "none"
		if st.LastError != nil {
			last = st.LastError.At.Format("2006-01-02 15:04:05Z") + " " + st.LastError.Message
		}
		fmt.Fprintf(c.stdout, "data directory  %s\nmount           %s\nsocket          %s\nhost            %s\nready           %s\n"+
			"sessions        %d open, %d binds\ncatalog         %d skills, %d versions, %d users\nlast error      %s\n",
			st.Home, st.Mount, st.Socket, st.Host, ready, st.Sessions, st.Binds, st.Skills, st.Versions, st.Users, last)
		if k := st.Keeper; k != nil {
			holds := "holds the mount's connection"
			if !k.Holds {
				holds = "DOES NOT hold the mount's connection (" + k.Error + ")"
			}
			fmt.Fprintf(c.stdout, "keeper          %s: %s; resumed at start: %t\n", k.Socket, holds, k.Resumed)
		}
		return nil
	}
	return cmd
}
