package main

import (
	"fmt"

	"skillfs/skills"
)

func (c *cli) userCmd(sub string, args []string) error {
	switch sub {
	case "add", "set":
		fs := c.flags("user " + sub)
		role := fs.String("role", "", "user, admin or superadmin (default user)")
		dept := fs.String("department", "", "department id")
		pos, cat, err := c.parseOpen(fs, args, 1, 1, "UID")
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
	case "list":
		fs := c.flags("user list")
		_, cat, err := c.parseOpen(fs, args, 0, 0, "no arguments")
		if err != nil {
			return err
		}
		defer cat.Close()
		us, err := cat.Users(c.ctx)
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
	case "delete":
		fs := c.flags("user delete")
		pos, cat, err := c.parseOpen(fs, args, 1, 1, "UID")
		if err != nil {
			return err
		}
		defer cat.Close()
		if err := cat.DeleteUser(c.ctx, c.as, pos[0]); err != nil {
			return err
		}
		c.notifyDaemon()
		return c.done(map[string]string{"deleted": pos[0]}, "user %s deleted", pos[0])
	}
	return fmt.Errorf("unknown user command %q (add, set, list, delete): %w", sub, errUsage)
}

func (c *cli) toolCmd(sub string, args []string, mcp bool) error {
	kind := "tool"
	if mcp {
		kind = "mcp"
	}
	switch sub {
	case "add", "delete":
		fs := c.flags(kind + " " + sub)
		pos, cat, err := c.parseOpen(fs, args, 1, 1, "NAME")
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
	case "list":
		fs := c.flags(kind + " list")
		_, cat, err := c.parseOpen(fs, args, 0, 0, "no arguments")
		if err != nil {
			return err
		}
		defer cat.Close()
		names, err := cat.Tools(c.ctx, mcp)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(nonNil(names))
		}
		for _, n := range names {
			fmt.Fprintln(c.stdout, n)
		}
		return nil
	}
	return fmt.Errorf("unknown %s command %q (add, list, delete): %w", kind, sub, errUsage)
}
