package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/api"
)

// tokenCmd is the named platform tokens: credentials of the API with a
// role, for a dashboard or a tool loader that must not hold the operator's
// key.
func (c *cli) tokenCmd() *cobra.Command {
	return group("token", "named API tokens of role operator or reader, for services that must not hold the operator's key (talks to the daemon)",
		c.tokenCreate(), c.tokenList(), c.tokenRevoke())
}

func (c *cli) tokenCreate() *cobra.Command {
	cmd := leaf("create NAME --role operator|reader [--expires D]",
		"make a named token; it is printed this once (only its hash is kept)", 1, 1)
	fs := cmd.Flags()
	role := fs.String("role", "", "what the token may do: `ROLE` operator (everything) or reader (sessions, activations, events, the catalog's listing; nothing that changes state)")
	expires := fs.String("expires", "", "when it stops working: a duration from now (`D`: 24h, 90m) or an RFC 3339 time (default never)")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		if *role == "" {
			return fmt.Errorf("token create needs --role %s or --role %s: %w", api.RoleOperator, api.RoleReader, errUsage)
		}
		var out api.TokenCreated
		if err := c.call("POST", "/v1/tokens", api.TokenRequest{Name: pos[0], Role: *role, Expires: *expires}, &out); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(out)
		}
		fmt.Fprintln(c.stdout, out.Token)
		until := "it does not expire"
		if out.ExpiresAt != nil {
			until = "it expires " + out.ExpiresAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(c.stderr, "token %s (role %s): shown this once, keep it; %s; `skillfs token revoke %s` ends it\n", out.Name, out.Role, until, out.Name)
		return nil
	}
	return cmd
}

func (c *cli) tokenList() *cobra.Command {
	cmd := leaf("list", "the named tokens, working or not (never a token itself)", 0, 0)
	cmd.RunE = func(*cobra.Command, []string) error {
		var list []api.TokenInfo
		if err := c.call("GET", "/v1/tokens", nil, &list); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(list)
		}
		rows := make([][]string, len(list))
		for i, t := range list {
			expires, state := "never", "works"
			if t.ExpiresAt != nil {
				expires = t.ExpiresAt.Local().Format(time.DateTime)
			}
			switch {
			case t.Revoked:
				state = "revoked"
			case t.Expired:
				state = "expired"
			}
			rows[i] = []string{t.Name, t.Role, t.CreatedAt.Local().Format(time.DateTime), expires, state}
		}
		c.table([]string{"NAME", "ROLE", "CREATED", "EXPIRES", "STATE"}, rows)
		return nil
	}
	return cmd
}

func (c *cli) tokenRevoke() *cobra.Command {
	cmd := leaf("revoke NAME", "end a named token: it fails from its next request", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		var out api.Revoked
		if err := c.call("DELETE", "/v1/tokens/"+url.PathEscape(pos[0]), nil, &out); err != nil {
			return err
		}
		return c.done(out, "token %s revoked", pos[0])
	}
	return cmd
}

// sessionToken is `session token ID --rotate`: a session's token is shown
// once, by the create that made it; a lost one is replaced, never shown.
func (c *cli) sessionToken() *cobra.Command {
	cmd := leaf("token ID --rotate", "give a session a new token and print it (the old one stops working); a token is shown only when made", 1, 1)
	rotate := cmd.Flags().Bool("rotate", false, "make the new token (required: a session's token is never shown again)")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		if !*rotate {
			return fmt.Errorf("session token %s: a session's token is shown once, when the session is made, and never again: "+
				"make a new one with --rotate (the old one then stops working): %w", pos[0], errUsage)
		}
		var out api.SessionToken
		if err := c.call("POST", "/v1/sessions/"+url.PathEscape(pos[0])+"/token", nil, &out); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(out)
		}
		fmt.Fprintln(c.stdout, out.Token)
		return nil
	}
	return cmd
}
