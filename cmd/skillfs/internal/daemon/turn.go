package daemon

import (
	"context"
	"fmt"
	"strings"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// Turn answers one turn of a session's agent (api.Turn): after refreshing
// a top-level session (a sub-agent's session follows its parent's refreshes instead; a refresh that changes nothing
// writes nothing), the list of the skills it may read, unless the agent
// has no read tool, and the skills selected for the turn, with their
// SKILL.md: first the preloaded ones (with their dependencies), then those
// whose SKILL.md says alwaysApply: true, each in the readable set's order,
// then those the message invokes (/skill:slug args) or names ($slug), in
// Mentions' order; each skill once, under the first of these reasons, with
// the arguments of a command that invoked it in any case. A skill that says
// user-invocable: false is never selected by the message. Every skill
// selected is recorded as activated, as a read of its SKILL.md through the
// mount is (the agent gets that file): its opens count, and its tools are
// to load.
//
// Text, in the xml and markdown formats, is the list (as GET
// /v1/sessions/{id}/prompt renders it, without inlining) followed by the
// selected skills; the json format leaves Text empty and gives the list in
// xml.
func (d *Daemon) Turn(ctx context.Context, id string, req api.TurnRequest) (*api.Turn, error) {
	format := req.Format
	switch format {
	case "":
		format = api.TurnXML
	case api.TurnXML, api.TurnMarkdown, api.TurnJSON:
	default:
		return nil, fmt.Errorf("turn format %q: want xml, markdown or json: %w", format, skills.ErrInvalid)
	}
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if !s.IsChild() {
		if _, err := d.refresh(ctx, id, false); err != nil {
			return nil, err
		}
		if s, err = d.Session(ctx, id); err != nil {
			return nil, err
		}
	}
	entries, err := d.promptEntries(ctx, s, d.viewFS(s), true)
	if err != nil {
		return nil, err
	}
	pre, err := d.preloadClosure(ctx, s)
	if err != nil {
		return nil, err
	}

	byslug := map[string]*promptEntry{}
	for i := range entries {
		byslug[entries[i].slug] = &entries[i]
	}
	out := &api.Turn{Selected: []api.TurnSkill{}}
	at := map[string]int{} // slug -> index in out.Selected
	add := func(e *promptEntry, why, args string) {
		if i, ok := at[e.slug]; ok {
			if args != "" && out.Selected[i].Args == "" {
				out.Selected[i].Args = args
			}
			return
		}
		at[e.slug] = len(out.Selected)
		out.Selected = append(out.Selected, api.TurnSkill{Slug: e.slug, Name: e.name, Path: e.loc, Why: why, Args: args, Content: string(e.data)})
	}
	for i := range entries {
		if pre[entries[i].slug] {
			add(&entries[i], api.WhyPreloaded, "")
		}
	}
	for i := range entries {
		if entries[i].m.AlwaysApply {
			add(&entries[i], api.WhyAlways, "")
		}
	}
	named, _ := namedIn(s, req.Message)
	for _, n := range named {
		if e := byslug[n.Slug]; e != nil && e.m.UserInvocable {
			add(e, api.WhyMentioned, n.Args)
		}
	}
	for _, sel := range out.Selected {
		if err := d.rec.Opened(id, sel.Slug); err != nil {
			return nil, err
		}
	}

	var listed []promptEntry
	for _, e := range entries {
		if e.listed {
			listed = append(listed, e)
		}
	}
	readTool := req.ReadTool == nil || *req.ReadTool
	var list, text strings.Builder
	switch format {
	case api.TurnXML, api.TurnJSON:
		if readTool {
			writeXMLList(&list, listed)
		}
		if format == api.TurnXML {
			text.WriteString(list.String())
			writeXMLSelected(&text, out.Selected)
		}
	case api.TurnMarkdown:
		if readTool {
			writeMarkdownList(&list, listed)
		}
		text.WriteString(list.String())
		writeMarkdownSelected(&text, out.Selected)
	}
	out.Prompt, out.Text = list.String(), text.String()
	return out, nil
}

func writeXMLSelected(b *strings.Builder, sel []api.TurnSkill) {
	if len(sel) == 0 {
		return
	}
	b.WriteString("<selected_skills>\n")
	for _, t := range sel {
		b.WriteString("  <skill>\n")
		fmt.Fprintf(b, "    <name>%s</name>\n    <location>%s</location>\n    <why>%s</why>\n", xmlEscape(t.Name), xmlEscape(t.Path), t.Why)
		if t.Args != "" {
			fmt.Fprintf(b, "    <args>%s</args>\n", xmlEscape(t.Args))
		}
		fmt.Fprintf(b, "    <content>\n%s\n    </content>\n", xmlEscape(strings.TrimRight(t.Content, "\n")))
		b.WriteString("  </skill>\n")
	}
	b.WriteString("</selected_skills>\n")
}

func writeMarkdownSelected(b *strings.Builder, sel []api.TurnSkill) {
	for i, t := range sel {
		if i == 0 {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString("## Selected skills\n")
		}
		fmt.Fprintf(b, "\n### %s (%s)\n\nLocation: `%s`\n", mdEscape(t.Name), t.Why, t.Path)
		if t.Args != "" {
			fmt.Fprintf(b, "Arguments: %s\n", mdEscape(t.Args))
		}
		fmt.Fprintf(b, "\n%s\n", strings.TrimRight(t.Content, "\n"))
	}
}
