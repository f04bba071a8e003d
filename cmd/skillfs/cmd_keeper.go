package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/internal/daemon"
	"skillfs/fs/keeper"
	"skillfs/skills"
)

// keeperCmd runs the keeper: the process that holds a duplicate of the
// daemon's FUSE connection, so that the mount and every bind of it outlive
// a restart or a crash of the daemon (`serve --keeper`).
func (c *cli) keeperCmd() *cobra.Command {
	cmd := leaf("keeper", "hold the daemon's FUSE connection so that its mount outlives a restart or crash of serve (serve --keeper); runs until SIGTERM or SIGINT", 0, 0)
	cmd.Long = cmd.Short + `.

The keeper listens on --socket (mode 0600; root and the keeper's own user may
connect) and keeps the /dev/fuse descriptor of each mount that serve --keeper
gives it, and nothing else: every descriptor is checked to be a live FUSE
connection. It logs what it keeps by name. A socket file left by a keeper
that died is replaced; one another keeper listens on is refused (exit 6).

Stopping the keeper closes what it keeps. While serve runs that costs
nothing (serve gives its connection to the next keeper within a second); while
serve is down it ends the mount: every bind of it then reads ENOTCONN until
serve starts again and binds afresh.`
	socket := cmd.Flags().String("socket", "", "the Unix socket `PATH` to listen on (serve --keeper names the same)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *socket == "" {
			return usageErr(cmd, "keeper needs --socket PATH")
		}
		log := c.logger()
		l, err := keeper.Listen(*socket)
		if errors.Is(err, keeper.ErrInUse) {
			return kindError{Msg: err.Error(), Kind: skills.ErrExists}
		}
		if err != nil {
			return err
		}
		ctx, _, cancel := c.untilSignalled(log)
		defer cancel()
		log.Info("keeper listening", "socket", *socket)
		if err := daemon.Notify("READY=1\nSTATUS=keeping FUSE connections on " + *socket); err != nil {
			log.Warn("tell the service manager the keeper is ready", "err", err)
		}
		if err := keeper.Serve(ctx, l, log); err != nil {
			return fmt.Errorf("keeper: %w", err)
		}
		log.Info("keeper stopped")
		return nil
	}
	return cmd
}
