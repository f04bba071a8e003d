package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
)

func (c *cli) userCmd() *cobra.Command {
	return group("user", "users, their roles and departments",
		c.userAdd("add"), c.userAdd("set"), c.userList(), c.userDelete())
}

func (c *cli) userAdd(sub string) *cobra.Command {
	cmd := leaf(sub+" UID", map[string]string{
		"add": "create a user (exit 6 if it exists)",
		"set": "change a user's role or department",
	}[sub], 1, 1)
	role := cmd.Flags().String("role", "", "user, admin or superadmin (default user)")
	dept := cmd.Flags().String("department", "", "department `ID`")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		u := skills.User{UID: pos[0], Role: *role, Department: *dept}
		if sub == "set" && *dept == "" {
			if old, err := cat.DB().User(c.ctx, pos[0]); err == nil {
				u.Department = old.Department
			}
		}
		if err := cat.PutUser(c.ctx, c.as, u, sub == "add"); err != nil {
			return err
		}
		c.notifyDaemon()
		u, _ = cat.DB().User(c.ctx, pos[0])
		return c.done(u, "user %s: role %s, department %q", u.UID, u.Role, u.Department)
	}
	return cmd
}

func (c *cli) userList() *cobra.Command {
	cmd := leaf("list", "every user with their role and department", 0, 0)
	cmd.RunE = func(*cobra.Command, []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		us, err := cat.Users(c.ctx, c.as)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(us)
		}
		rows := make([][]string, len(us))
		for i, u := range us {
			rows[i] = []string{u.UID, u.Role, u.Department}
		}
		c.table([]string{"UID", "ROLE", "DEPARTMENT"}, rows)
		return nil
	}
	return cmd
}

func (c *cli) userDelete() *cobra.Command {
	cmd := leaf("delete UID [--force] [--to OWNER]",
		"remove a user, handing the skills they created to OWNER (exit 6 while they have open sessions, unless --force)", 1, 1)
	force := cmd.Flags().Bool("force", false, "close the user's open sessions first")
	to := cmd.Flags().String("to", "", "who takes the skills the deleted user created: user `OWNER` (default: the acting user)")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		var closer catalog.CloseSessions
		if *force {
			closer = c.closeSessions()
		}
		res, err := cat.DeleteUser(c.ctx, c.as, pos[0], *to, *force, closer)
		if err != nil {
			return err
		}
		c.notifyDaemon()
		if err := c.done(res, "user %s deleted; %d open session(s) closed; %d skill(s) they created handed to %s, %d unshared from them",
			res.Deleted, len(res.Closed), len(res.Handed), res.Owner, len(res.Unshared)); err != nil || c.json {
			return err
		}
		for _, w := range res.Warnings {
			fmt.Fprintf(c.stdout, "  warning: %s\n", w)
		}
		return nil
	}
	return cmd
}

// closeSessions closes sessions through the daemon, which serves them; when
// no daemon runs it returns nil, for the catalog to close them in the index.
func (c *cli) closeSessions() catalog.CloseSessions {
	if err := c.call("GET", "/v1/health", nil, nil); errors.Is(err, errNoDaemon) {
		return nil
	}
	return func(_ context.Context, ids []string) error {
		for _, id := range ids {
			if err := c.call("DELETE", "/v1/sessions/"+url.PathEscape(id), nil, nil); err != nil {
				return fmt.Errorf("close session %s: %w", id, err)
			}
		}
		return nil
	}
}

func (c *cli) toolCmd(mcp bool) *cobra.Command {
	kind, what := "tool", "tools"
	if mcp {
		kind, what = "mcp", "MCP servers"
	}
	return group(kind, "registered "+what+" (skills may depend on them)",
		c.toolAdd(kind, "add", mcp), c.toolAdd(kind, "delete", mcp), c.toolList(what, mcp))
}

func (c *cli) toolAdd(kind, sub string, mcp bool) *cobra.Command {
	cmd := leaf(sub+" NAME", sub+" a registered "+kind, 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		if sub == "add" {
			err = cat.AddTool(c.ctx, c.as, pos[0], mcp)
		} else {
			err = cat.DeleteTool(c.ctx, c.as, pos[0], mcp)
		}
		if err != nil {
			return err
		}
		past := map[string]string{"add": "added", "delete": "deleted"}[sub]
		return c.done(map[string]string{past: pos[0]}, "%s %s %s", kind, pos[0], past)
	}
	return cmd
}

func (c *cli) toolList(what string, mcp bool) *cobra.Command {
	cmd := leaf("list", "the registered "+what, 0, 0)
	cmd.RunE = func(*cobra.Command, []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		names, err := cat.Tools(c.ctx, mcp)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(api.NonNil(names))
		}
		for _, n := range names {
			fmt.Fprintln(c.stdout, n)
		}
		return nil
	}
	return cmd
}
