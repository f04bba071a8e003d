package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"

	"github.com/spf13/cobra"
)

func (c *cli) sessionInstall() *cobra.Command {
	cmd := leaf("install ID (--path P | --source S [--ref R] | --file F) [--now]",
		"install a skill for a session, as its user and private to them: from a path as the session's sandbox sees it, a remote git source, or a ZIP or SKILL.md of this machine; it joins the session at its next refresh, or at once with --now", 1, 1)
	fs := cmd.Flags()
	path := fs.String("path", "", "an absolute `PATH` as the sandbox the session is bound into sees it: a skill folder, a ZIP or a SKILL.md, read with the sandboxed process's own permissions")
	source := fs.String("source", "", "a remote git `SOURCE`: URL or owner/repo")
	ref := fs.String("ref", "", "with --source: the git `REF`")
	file := fs.String("file", "", "a ZIP or SKILL.md `FILE` of this machine, sent as the skill itself")
	now := fs.Bool("now", false, "refresh the session at once: the skill is readable when the command returns")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		given := 0
		for _, v := range []string{*path, *source, *file} {
			if v != "" {
				given++
			}
		}
		if given != 1 {
			return fmt.Errorf("give one of --path, --source and --file: %w", skills.ErrInvalid)
		}
		if *ref != "" && *source == "" {
			return fmt.Errorf("--ref goes with --source: %w", skills.ErrInvalid)
		}
		route := "/v1/sessions/" + url.PathEscape(pos[0]) + "/skills"
		var out api.SessionInstall
		if *file != "" {
			client, err := c.client()
			if err != nil {
				return err
			}
			f, err := os.Open(*file)
			if err != nil {
				return err
			}
			defer f.Close()
			ctype := "text/markdown"
			if strings.EqualFold(filepath.Ext(*file), ".zip") {
				ctype = "application/zip"
			}
			q := url.Values{"name": {filepath.Base(*file)}}
			if *now {
				q.Set("now", "true")
			}
			if _, err := client.Send(c.ctx, "POST", route+"?"+q.Encode(), ctype, f, &out); err != nil {
				return err
			}
		} else if err := c.call("POST", route, api.InstallRequest{Path: *path, Source: *source, Ref: *ref, Now: *now}, &out); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(out)
		}
		joins := "joins the session at its next refresh"
		if out.Joined {
			joins = "readable in the session now"
		}
		fmt.Fprintf(c.stdout, "installed %s (%s) version %s: %s\n", out.Slug, out.Name, out.Version, joins)
		if out.RenamedFrom != "" {
			fmt.Fprintf(c.stdout, "note: %s is another skill's: installed as %s\n", out.RenamedFrom, out.Slug)
		}
		for _, w := range out.Warnings {
			fmt.Fprintf(c.stdout, "warning: %s\n", w)
		}
		return nil
	}
	return cmd
}
