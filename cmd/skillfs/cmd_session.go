package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"skillfs/cmd/skillfs/internal/daemon"
	"skillfs/skills"
)

func (c *cli) sessionCmd(sub string, args []string) error {
	switch sub {
	case "create":
		fs := c.flags("session create")
		user := fs.String("user", "", "the session's user")
		var sk, preload listFlag
		fs.Var(&sk, "skills", "requested skills, comma-separated (repeatable)")
		fs.Var(&preload, "preload", "skills to inline in the prompt and load tools for from the start")
		all := fs.Bool("all", false, "every skill the user may read")
		if _, err := parse(fs, args, 0, 0, "--user UID [--skills a,b | --all] [--preload a,b]"); err != nil {
			return err
		}
		if *user == "" {
			return fmt.Errorf("session create needs --user UID: %w", errUsage)
		}
		var info daemon.SessionInfo
		req := daemon.CreateRequest{User: *user, Skills: sk, All: *all, Preload: preload}
		if err := c.call("POST", "/v1/sessions", req, &info); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(info)
		}
		fmt.Fprintf(c.stdout, "session %s\npath %s\nreadable: %s\n", info.ID, info.Path, strings.Join(info.Readable, " "))
		for _, s := range info.Skipped {
			fmt.Fprintf(c.stdout, "left out: %s (%s)\n", s.Slug, s.Reason)
		}
		return nil
	case "list":
		fs := c.flags("session list")
		limit := fs.Int("limit", 0, "list at most this many sessions (default: all)")
		after := fs.String("after", "", "list the sessions that come after this one")
		if _, err := parse(fs, args, 0, 0, "[--limit N] [--after ID]"); err != nil {
			return err
		}
		if *limit < 0 {
			return fmt.Errorf("--limit %d: want a positive number: %w", *limit, errUsage)
		}
		list, more, err := c.sessions(*after, *limit)
		if err != nil {
			return err
		}
		if more {
			fmt.Fprintf(c.stderr, "more sessions follow: skillfs session list --after %s --limit %d\n", list[len(list)-1].ID, *limit)
		}
		if c.json {
			return c.printJSON(list)
		}
		rows := make([][]string, len(list))
		for i, s := range list {
			rows[i] = []string{s.ID, s.User, strings.Join(s.Readable, ","), bindList(s.Binds)}
		}
		c.table([]string{"ID", "USER", "READABLE", "MOUNTS"}, rows)
		return nil
	case "show", "refresh", "close":
		fs := c.flags("session " + sub)
		pos, err := parse(fs, args, 1, 1, "ID")
		if err != nil {
			return err
		}
		id := url.PathEscape(pos[0])
		var info daemon.SessionInfo
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
		fmt.Fprintf(c.stdout, "session %s (user %s)\npath %s\nreadable: %s\nmounts: %s\n", info.ID, info.User,
			info.Path, strings.Join(info.Readable, " "), bindList(info.Binds))
		return nil
	case "mount", "unmount":
		fs := c.flags("session " + sub)
		pid := fs.Int("pid", 0, "bind inside the mount namespace of this process (a running sandbox); TARGET is a path there")
		pos, err := parse(fs, args, 2, 2, "ID TARGET [--pid PID]")
		if err != nil {
			return err
		}
		target := pos[1]
		if *pid == 0 {
			if target, err = filepath.Abs(target); err != nil {
				return err
			}
		}
		id := url.PathEscape(pos[0])
		if sub == "mount" {
			err = c.call("POST", "/v1/sessions/"+id+"/mounts", map[string]any{"target": target, "pid": *pid}, nil)
		} else {
			err = c.call("DELETE", fmt.Sprintf("/v1/sessions/%s/mounts?target=%s&pid=%d", id, url.QueryEscape(target), *pid), nil, nil)
		}
		if err != nil {
			return err
		}
		where := target
		if *pid > 0 {
			where = fmt.Sprintf("%s in the namespace of process %d", target, *pid)
		}
		return c.done(map[string]any{"session": pos[0], "target": target, "pid": *pid}, "session %s %sed at %s", pos[0], sub, where)
	case "activations":
		fs := c.flags("session activations")
		pos, err := parse(fs, args, 1, 1, "ID")
		if err != nil {
			return err
		}
		var a daemon.Activations
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
	case "prompt":
		fs := c.flags("session prompt")
		format := fs.String("format", "xml", "xml or markdown")
		pos, err := parse(fs, args, 1, 1, "ID")
		if err != nil {
			return err
		}
		return c.call("GET", "/v1/sessions/"+url.PathEscape(pos[0])+"/prompt?format="+url.QueryEscape(*format), nil, c.stdout)
	case "mentions":
		fs := c.flags("session mentions")
		text := fs.String("text", "", "the message text")
		pos, err := parse(fs, args, 1, 1, "ID --text TEXT")
		if err != nil {
			return err
		}
		var out struct {
			Mentions []daemon.Mention `json:"mentions"`
		}
		if err := c.call("POST", "/v1/sessions/"+url.PathEscape(pos[0])+"/mentions", map[string]string{"text": *text}, &out); err != nil {
			return err
		}
		if c.json {
			return c.printJSON(out)
		}
		for _, m := range out.Mentions {
			fmt.Fprintf(c.stdout, "== %s (%s)\n%s\n", m.Slug, m.Path, m.Content)
		}
		return nil
	case "read":
		fs := c.flags("session read")
		pos, err := parse(fs, args, 2, 2, "ID skill://SLUG[/PATH]")
		if err != nil {
			return err
		}
		return c.call("GET", "/v1/sessions/"+url.PathEscape(pos[0])+"/resolve?uri="+url.QueryEscape(pos[1]), nil, c.stdout)
	}
	return fmt.Errorf("unknown session command %q (create, list, show, mount, unmount, refresh, close, activations, prompt, mentions, read): %w", sub, errUsage)
}

func bindList(bs []skills.Bind) string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Target
		if b.PID > 0 {
			out[i] = fmt.Sprintf("%s@%d", b.Target, b.PID)
		}
	}
	return strings.Join(out, ",")
}

// sessions lists up to limit open sessions after session after (every one
// when limit is 0), a page at a time, oldest first, and reports whether
// more follow.
func (c *cli) sessions(after string, limit int) ([]daemon.SessionInfo, bool, error) {
	list := []daemon.SessionInfo{}
	size := daemon.MaxSessionPage
	if limit > 0 {
		size = min(limit, size)
	}
	q := url.Values{"limit": {strconv.Itoa(size)}}
	if after != "" {
		q.Set("after", after)
	}
	for path := "/v1/sessions?" + q.Encode(); path != ""; {
		var page []daemon.SessionInfo
		h, err := c.request("GET", path, nil, &page)
		if err != nil {
			return nil, false, err
		}
		list = append(list, page...)
		path = daemon.NextPage(h.Get("Link"))
		if limit > 0 && len(list) >= limit {
			return list[:limit], len(list) > limit || path != "", nil
		}
	}
	return list, false, nil
}
