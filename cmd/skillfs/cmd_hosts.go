package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/api"
)

func (c *cli) hostsCmd() *cobra.Command {
	cmd := leaf("hosts", "the hosts serving this catalog (sharing its index): whether each is alive, and the sessions it serves (talks to the daemon)", 0, 0)
	cmd.RunE = func(*cobra.Command, []string) error {
		var list []api.HostInfo
		if err := c.call("GET", "/v1/hosts", nil, &list); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(list)
		}
		rows := make([][]string, len(list))
		for i, h := range list {
			alive := "no"
			if h.Alive {
				alive = "yes"
			}
			name := h.Name
			if h.Self {
				name += " (this host)"
			}
			rows[i] = []string{h.ID, name, alive, h.LastSeen.Local().Format(time.DateTime), fmt.Sprint(h.Sessions), h.API}
		}
		c.table([]string{"ID", "NAME", "ALIVE", "LAST SEEN", "SESSIONS", "API"}, rows)
		return nil
	}
	return cmd
}
