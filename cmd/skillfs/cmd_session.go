package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
	"skillfs/skills/store"
)

func (c *cli) sessionCmd() *cobra.Command {
	return group("session", "open and manage agent sessions (talks to the daemon)",
		c.sessionCreate(), c.sessionSet(), c.sessionList(), c.sessionShow("show"), c.sessionShow("refresh"), c.sessionShow("close"),
		c.sessionMount("mount"), c.sessionMount("unmount"), c.sessionActivations(), c.sessionAudit(), c.sessionPrompt(),
		c.sessionMentions(), c.sessionTurn(), c.sessionGlobs(), c.sessionRead(), c.sessionMove(), c.sessionInstall(),
		c.sessionToken())
}

func (c *cli) sessionCreate() *cobra.Command {
	cmd := leaf("create (--user UID | --parent ID) [--skills a,b | --all] [--preload a,b] [--key K] [--label k=v]",
		"open a session for a user, with the skills it asks for or all it may read; or a sub-agent session of an open session", 0, 0)
	fs := cmd.Flags()
	user := fs.String("user", "", "the session's user: `UID` (with --parent: the parent's, when not given)")
	var sk, preload listFlag
	fs.Var(&sk, "skills", "requested `SLUGS`, comma-separated (repeatable); SLUG@VERSION keeps that version (a unique hash prefix) across refreshes; "+
		"with --parent, a subset of the parent's skills (default: all of them)")
	fs.Var(&preload, "preload", "`SLUGS` to inline in the prompt and load tools for from the start")
	all := fs.Bool("all", false, "every skill the user may read")
	key := fs.String("key", "", "the client's key `K` (a thread id): while a session of the user with it is open, that session is answered instead of a new one")
	labels := fs.StringArray("label", nil, "a label `KEY=VALUE` to find the session by (repeatable)")
	parent := fs.String("parent", "", "open a sub-agent session of the open session `ID`: it reads a subset of its skills and closes with it")
	cmd.RunE = func(*cobra.Command, []string) error {
		if *user == "" && *parent == "" {
			return fmt.Errorf("session create needs --user UID (or --parent ID): %w", errUsage)
		}
		lb, err := skills.ParseLabels(*labels)
		if err != nil {
			return fmt.Errorf("--label: %w: %w", err, errUsage)
		}
		var info api.SessionInfo
		req := api.CreateRequest{User: *user, Skills: sk, All: *all, Preload: preload, Key: *key, Labels: lb, Parent: *parent}
		if err := c.call("POST", "/v1/sessions", req, &info); err != nil {
			return err
		}
		return c.printSession(info)
	}
	return cmd
}

// printSession prints what session create and set answer.
func (c *cli) printSession(info api.SessionInfo) error {
	if c.json {
		return c.printJSON(info)
	}
	fmt.Fprintf(c.stdout, "session %s\npath %s\nreadable: %s\n", info.ID, info.Path, strings.Join(info.Readable, " "))
	if info.Existing {
		fmt.Fprintf(c.stdout, "existing: the open session of key %s (none was made)\n", info.Key)
	}
	if info.Parent != "" {
		fmt.Fprintf(c.stdout, "parent: %s\n", info.Parent)
	}
	if info.Token != "" {
		fmt.Fprintf(c.stdout, "token %s\n", info.Token)
		fmt.Fprintf(c.stderr, "the session's token is shown this once: keep it (`skillfs session token %s --rotate` makes a new one)\n", info.ID)
	}
	if len(info.Pinned) > 0 {
		fmt.Fprintf(c.stdout, "pinned: %s\n", strings.Join(info.Pinned, " "))
	}
	for _, s := range info.Skipped {
		fmt.Fprintf(c.stdout, "left out: %s (%s)\n", s.Slug, s.Reason)
	}
	return nil
}

func (c *cli) sessionSet() *cobra.Command {
	cmd := leaf("set ID (--skills a,b | --all) [--preload a,b]",
		"change the skills of an open session: kept skills keep their version and activations, dropped ones are revoked at once", 1, 1)
	fs := cmd.Flags()
	var sk, preload listFlag
	fs.Var(&sk, "skills", "the session's `SLUGS` from now on, comma-separated (repeatable; '' for none)")
	fs.Var(&preload, "preload", "`SLUGS` to inline in the prompt and load tools for (none when not given)")
	all := fs.Bool("all", false, "every skill the user may read")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		set := cmd.Flags().Changed("skills")
		if set == *all {
			return fmt.Errorf("session set needs either --skills SLUGS (--skills '' for none) or --all: %w", errUsage)
		}
		req := api.SetRequest{All: *all, Preload: preload}
		if set {
			req.Skills = append([]string{}, sk...)
		}
		var info api.SessionInfo
		if err := c.call("PATCH", "/v1/sessions/"+url.PathEscape(pos[0]), req, &info); err != nil {
			return err
		}
		return c.printSession(info)
	}
	return cmd
}

func (c *cli) sessionList() *cobra.Command {
	cmd := leaf("list [--limit N] [--after ID] [--host ID] [--user UID] [--key K] [--label k=v]", "open sessions, oldest first, of every host", 0, 0)
	limit := cmd.Flags().Int("limit", 0, "list at most `N` sessions (default: all)")
	after := cmd.Flags().String("after", "", "list the sessions that come after session `ID`")
	host := cmd.Flags().String("host", "", "list only the sessions the host `ID` serves (see `skillfs hosts`)")
	user := cmd.Flags().String("user", "", "list only the sessions of user `UID`")
	key := cmd.Flags().String("key", "", "list only the sessions with client key `K` (with --user: at most one top-level session)")
	labels := cmd.Flags().StringArray("label", nil, "list only the sessions with label `KEY=VALUE` (repeatable: all of them)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if *limit < 0 {
			return fmt.Errorf("--limit %d: want a positive number: %w", *limit, errUsage)
		}
		if _, err := skills.ParseLabels(*labels); err != nil {
			return fmt.Errorf("--label: %w: %w", err, errUsage)
		}
		find, again := url.Values{}, ""
		for _, f := range []struct{ name, v string }{{"host", *host}, {"user", *user}, {"key", *key}} {
			if f.v != "" {
				find.Set(f.name, f.v)
				again += " --" + f.name + " " + f.v
			}
		}
		for _, l := range *labels {
			find.Add("label", l)
			again += " --label " + l
		}
		list, more, err := c.sessions(find, *after, *limit)
		if err != nil {
			return err
		}
		if more {
			fmt.Fprintf(c.stderr, "more sessions follow: skillfs session list --after %s --limit %d%s\n", list[len(list)-1].ID, *limit, again)
		}
		if c.json {
			return c.printJSON(list)
		}
		rows := make([][]string, len(list))
		for i, s := range list {
			rows[i] = []string{s.ID, s.User, store.ShortHash(s.Host), strings.Join(s.Readable, ","), bindList(s.Binds)}
		}
		c.table([]string{"ID", "USER", "HOST", "READABLE", "MOUNTS"}, rows)
		return nil
	}
	return cmd
}

func (c *cli) sessionShow(sub string) *cobra.Command {
	cmd := leaf(sub+" ID", map[string]string{
		"show":    "one session: its user, path, readable skills and mounts",
		"refresh": "move a session to the current versions of its skills",
		"close":   "close a session: its view and binds go away",
	}[sub], 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) (err error) {
		id := url.PathEscape(pos[0])
		var info api.SessionInfo
		switch sub {
		case "show":
			err = c.call("GET", "/v1/sessions/"+id, nil, &info)
		case "refresh":
			err = c.call("POST", "/v1/sessions/"+id+"/refresh", nil, &info)
		case "close":
			err = c.call("DELETE", "/v1/sessions/"+id, nil, nil)
			if err == nil {
				return c.done(map[string]string{"closed": pos[0]}, "session %s closed", pos[0])
			}
		}
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(info)
		}
		fmt.Fprintf(c.stdout, "session %s (user %s)\nhost %s\npath %s\nreadable: %s\nmounts: %s\n", info.ID, info.User,
			info.Host, info.Path, strings.Join(info.Readable, " "), bindList(info.Binds))
		return nil
	}
	return cmd
}

func (c *cli) sessionMove() *cobra.Command {
	cmd := leaf("move ID [--force]", "take a session over from a host that is gone: this host serves it with its pinned versions and activations; its binds must be made again here", 1, 1)
	force := cmd.Flags().Bool("force", false, "take it over even while the host serving it is alive (its heartbeat within the grace)")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		var m api.Moved
		if err := c.call("POST", "/v1/sessions/"+url.PathEscape(pos[0])+"/move", api.MoveRequest{Force: *force}, &m); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(m)
		}
		fmt.Fprintf(c.stdout, "session %s moved from host %s to host %s\npath %s\nreadable: %s\n", m.ID, m.From, m.Host, m.Path,
			strings.Join(m.Readable, " "))
		for _, s := range m.Skipped {
			fmt.Fprintf(c.stdout, "left out: %s (%s)\n", s.Slug, s.Reason)
		}
		if m.Note != "" {
			fmt.Fprintf(c.stdout, "binds dropped: %s\nnote: %s\n", bindList(m.Dropped), m.Note)
		}
		return nil
	}
	return cmd
}

func (c *cli) sessionMount(sub string) *cobra.Command {
	use := sub + " ID TARGET [--pid PID]"
	if sub == "mount" {
		use += " [--api-socket PATH]"
	}
	cmd := leaf(use, map[string]string{
		"mount":   "bind a session read-only at TARGET, and its API socket at PATH when asked",
		"unmount": "remove a session's bind at TARGET, and its API socket",
	}[sub], 2, 2)
	pid := cmd.Flags().Int("pid", 0, "bind inside the mount namespace of process `PID` (a running sandbox); TARGET is a path there")
	var socket *string
	if sub == "mount" {
		socket = cmd.Flags().String("api-socket", "", "also make the session's API socket at `PATH` in the same namespace, "+
			"as process PID's user (its folder must exist there): every request on it acts as the session, no token needed")
	}
	cmd.RunE = func(_ *cobra.Command, pos []string) (err error) {
		target := pos[1]
		var sock string
		if socket != nil {
			sock = *socket
		}
		if *pid == 0 {
			if target, err = filepath.Abs(target); err != nil {
				return err
			}
			if sock != "" {
				if sock, err = filepath.Abs(sock); err != nil {
					return err
				}
			}
		}
		id := url.PathEscape(pos[0])
		var res api.BindResult
		if sub == "mount" {
			err = c.call("POST", "/v1/sessions/"+id+"/mounts", skills.Bind{Target: target, PID: *pid, APISocket: sock}, &res)
		} else {
			err = c.call("DELETE", fmt.Sprintf("/v1/sessions/%s/mounts?target=%s&pid=%d", id, url.QueryEscape(target), *pid), nil, &res)
		}
		if err != nil {
			return err
		}
		where := target
		if *pid > 0 {
			where = fmt.Sprintf("%s in the namespace of process %d", target, *pid)
		}
		out := map[string]any{"session": pos[0], "target": target, "pid": *pid}
		if res.APISocket != "" {
			out["api_socket"] = res.APISocket
			where += ", api socket " + res.APISocket
		}
		return c.done(out, "session %s %sed at %s", pos[0], sub, where)
	}
	return cmd
}

func (c *cli) sessionActivations() *cobra.Command {
	cmd := leaf("activations ID", "the skills a session activated, and the tools and MCP servers to load", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		var a api.Activations
		if err := c.call("GET", "/v1/sessions/"+url.PathEscape(pos[0])+"/activations", nil, &a); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(a)
		}
		rows := make([][]string, len(a.Activated))
		for i, x := range a.Activated {
			rows[i] = []string{x.Slug, x.FirstAt.Format("15:04:05.000"), x.LastAt.Format("15:04:05.000"), fmt.Sprint(x.Opens)}
		}
		c.table([]string{"SKILL", "FIRST", "LAST", "OPENS"}, rows)
		fmt.Fprintf(c.stdout, "tools: %s\nmcp servers: %s\n", strings.Join(a.Tools, " "), strings.Join(a.MCPs, " "))
		for _, x := range a.Conflicts {
			fmt.Fprintf(c.stdout, "conflict: %s\n", x)
		}
		return nil
	}
	return cmd
}

func (c *cli) sessionAudit() *cobra.Command {
	cmd := leaf("audit ID", "which files of which skills a session read, when it first did, and how many reads reached skillfs", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		var reads []skills.FileRead
		if err := c.call("GET", "/v1/sessions/"+url.PathEscape(pos[0])+"/audit", nil, &reads); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(reads)
		}
		rows := make([][]string, len(reads))
		for i, x := range reads {
			rows[i] = []string{x.Slug, x.Path, x.FirstAt.Format(time.RFC3339), fmt.Sprint(x.Reads)}
		}
		c.table([]string{"SKILL", "PATH", "FIRST", "READS"}, rows)
		return nil
	}
	return cmd
}

func (c *cli) sessionPrompt() *cobra.Command {
	cmd := leaf("prompt ID", "the skills block for a session's system prompt", 1, 1)
	format := cmd.Flags().String("format", "xml", "`FORMAT` of the block: xml or markdown")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		return c.call("GET", "/v1/sessions/"+url.PathEscape(pos[0])+"/prompt?format="+url.QueryEscape(*format), nil, c.stdout)
	}
	return cmd
}

func (c *cli) sessionMentions() *cobra.Command {
	cmd := leaf("mentions ID --text TEXT", "the skills a message invokes as /skill:slug commands or names as $slug, with their SKILL.md", 1, 1)
	text := cmd.Flags().String("text", "", "the message `TEXT`")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		var out struct {
			Mentions []api.Mention `json:"mentions"`
		}
		if err := c.call("POST", "/v1/sessions/"+url.PathEscape(pos[0])+"/mentions", map[string]string{"text": *text}, &out); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(out)
		}
		for _, m := range out.Mentions {
			if !m.Command {
				fmt.Fprintf(c.stdout, "== %s (%s)\n%s\n", m.Slug, m.Path, m.Content)
				continue
			}
			// What the command injects: the body, then where it came from
			// and the user's arguments.
			fmt.Fprintf(c.stdout, "== /skill:%s (%s)\n%s\n\nSkill: %s\n", m.Slug, m.Path, m.Body, m.Path)
			if m.Args != "" {
				fmt.Fprintf(c.stdout, "User: %s\n", m.Args)
			}
		}
		return nil
	}
	return cmd
}

func (c *cli) sessionTurn() *cobra.Command {
	cmd := leaf("turn ID --message TEXT [--no-read-tool] [--format F]",
		"one turn of a session's agent: the skills list and the skills selected for the turn (preloaded, alwaysApply, named in the message), with their SKILL.md; refreshes the session first", 1, 1)
	fs := cmd.Flags()
	message := fs.String("message", "", "the turn's message `TEXT`")
	noRead := fs.Bool("no-read-tool", false, "the agent has no tool to read files: leave the list out")
	format := fs.String("format", api.TurnXML, "`FORMAT` of the text: xml, markdown or json (json prints the answer, the text left out)")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		readTool := !*noRead
		req := api.TurnRequest{Message: *message, ReadTool: &readTool, Format: *format}
		var out api.Turn
		if err := c.call("POST", "/v1/sessions/"+url.PathEscape(pos[0])+"/turn", req, &out); err != nil {
			return err
		}
		if c.json || *format == api.TurnJSON {
			return c.printJSON(out)
		}
		fmt.Fprint(c.stdout, out.Text)
		return nil
	}
	return cmd
}

func (c *cli) sessionGlobs() *cobra.Command {
	cmd := leaf("globs ID PATH...", "the skills of a session whose globs match each file path", 2, -1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		var out api.Globs
		if err := c.call("POST", "/v1/sessions/"+url.PathEscape(pos[0])+"/globs", api.GlobsRequest{Paths: pos[1:]}, &out); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(out)
		}
		var rows [][]string
		for _, p := range out.Paths {
			for _, m := range p.Skills {
				rows = append(rows, []string{p.Path, m.Slug, strings.Join(m.Globs, ",")})
			}
		}
		c.table([]string{"PATH", "SKILL", "GLOBS"}, rows)
		return nil
	}
	return cmd
}

func (c *cli) sessionRead() *cobra.Command {
	cmd := leaf("read ID skill://SLUG[/PATH]", "a file of a session's view", 2, 2)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		return c.call("GET", "/v1/sessions/"+url.PathEscape(pos[0])+"/resolve?uri="+url.QueryEscape(pos[1]), nil, c.stdout)
	}
	return cmd
}

func bindList(bs []skills.Bind) string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Target
		if b.PID > 0 {
			out[i] = fmt.Sprintf("%s@%d", b.Target, b.PID)
		}
		if b.APISocket != "" {
			out[i] += " (api socket " + b.APISocket + ")"
		}
	}
	return strings.Join(out, ",")
}

// sessions lists up to limit open sessions after session after (every one
// when limit is 0), of every host or those the query find narrows them to
// (host, user, key, label), a page at a time, oldest first, and reports
// whether more follow.
func (c *cli) sessions(find url.Values, after string, limit int) ([]api.SessionInfo, bool, error) {
	list := []api.SessionInfo{}
	size := api.MaxSessionPage
	if limit > 0 {
		size = min(limit, size)
	}
	q := url.Values{"limit": {strconv.Itoa(size)}}
	if after != "" {
		q.Set("after", after)
	}
	for k, v := range find {
		q[k] = v
	}
	for path := "/v1/sessions?" + q.Encode(); path != ""; {
		var page []api.SessionInfo
		h, err := c.request("GET", path, nil, &page)
		if err != nil {
			return nil, false, err
		}
		list = append(list, page...)
		path = api.NextPage(h.Get("Link"))
		if limit > 0 && len(list) >= limit {
			return list[:limit], len(list) > limit || path != "", nil
		}
	}
	return list, false, nil
}
