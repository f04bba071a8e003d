package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/catalog/datadir"
	"skillfs/skills"
)

// check examines a data directory and, with --repair, repairs it.
func (c *cli) checkCmd() *cobra.Command {
	cmd := leaf("check [--repair]", "check the data directory: the index against the content store (with a shared index, this host's cache against it); exit 8 when it is not consistent", 0, 0)
	repair := cmd.Flags().Bool("repair", false, "repair what can be repaired (daemon stopped): rebuild a damaged index from the store, quarantine what the index cannot explain, restore what it needs (a shared index is never rebuilt: only this host's cache is repaired)")
	cmd.RunE = func(*cobra.Command, []string) error {
		home, err := c.homeDir()
		if err != nil {
			return err
		}
		target, err := c.indexTarget()
		if err != nil {
			return err
		}
		var r *datadir.Report
		shared := catalog.Options{Logger: c.logger(), Index: target}
		switch {
		case shared.Index != "" && *repair:
			r, err = catalog.RepairShared(c.ctx, home, shared)
		case shared.Index != "":
			r, err = catalog.CheckShared(c.ctx, home, shared)
		case *repair:
			r, err = catalog.Repair(c.ctx, home, catalog.Options{Logger: c.logger()})
		default:
			r, err = datadir.Check(c.ctx, home, true)
		}
		if err != nil {
			return err
		}
		if c.json {
			if err := c.printJSON(r); err != nil {
				return err
			}
		} else {
			printReport(c, r)
		}
		if !r.OK {
			what := "run `skillfs check --repair` (with the daemon stopped)"
			if *repair {
				what = "what is left needs a decision: see above"
			}
			return fmt.Errorf("data directory %s is not consistent: %s: %w", r.Home, what, skills.ErrDamaged)
		}
		return nil
	}
	return cmd
}

func printReport(c *cli, r *datadir.Report) {
	w := c.stdout
	fmt.Fprintf(w, "data directory: %s\n", r.Home)
	fmt.Fprintf(w, "index:          %s", r.Index)
	if r.IndexError != "" {
		fmt.Fprintf(w, " (%s)", r.IndexError)
	}
	if r.Shared {
		fmt.Fprint(w, " (shared by the hosts of a fleet: never rebuilt from a host's store; this data directory is one host, its store the host's cache)")
	}
	fmt.Fprintf(w, "\nidentity:       %s\n", r.Identity)
	fmt.Fprintf(w, "catalog:        %d skills, %d versions, %d users, %d sessions\n", r.Skills, r.Versions, r.Users, r.Sessions)
	fmt.Fprintf(w, "store:          %d version directories\n", r.Stored)
	if r.Shared {
		fmt.Fprintf(w, "not cached:     %d versions (fetched from the shared index on first use)\n", r.NotCached)
	}
	list := func(title string, refs []datadir.VersionRef) {
		for _, v := range refs {
			fmt.Fprintf(w, "%s %s/%s\n", title, v.Slug, v.Hash)
		}
	}
	list("not in the index (would be quarantined):", r.Unexplained)
	list("content missing:", r.Missing)
	list("content does not match its hash:", r.Mismatched)
	list("content could not be read (check the disk; nothing was moved):", r.Unreadable)
	list("content not in the shared index, held here (stored by the next serve or check --repair):", r.NoContent)
	list("content not in the shared index, not held here (only the host that holds it can store it):", r.Unfetchable)
	if n := len(r.NoMetadata); n > 0 {
		fmt.Fprintf(w, "%d versions lack their metadata file (written at the next start or repair)\n", n)
	}
	for _, q := range r.Quarantine {
		fmt.Fprintf(w, "quarantined: %s (%s)\n", q.Path, q.Reason)
	}
	for _, a := range r.Actions {
		fmt.Fprintf(w, "done: %s\n", a)
	}
	if r.OK {
		fmt.Fprintln(w, "ok")
	}
}
