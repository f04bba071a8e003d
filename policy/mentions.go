package policy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxSlugLen is the longest slug the package format allows.
const maxSlugLen = 64

// Mentions returns the skills named in text as "$slug" (which also covers the
// link form "[$slug](...)"), in order of first appearance and without
// repeats, keeping only slugs for which known returns true.
//
// A mention is a '$' followed by a slug: lower-case letters, digits and single
// inner hyphens, at most 64 characters. The '$' must start the text or follow
// a character that is neither a word character (letter, digit, '_') nor one
// of '$', '/' and '\': so "a$b" is no mention, "$$pdf" and "\$pdf" are an
// escaped dollar, and "https://x/$pdf" is a path, not a mention. The name
// ends at the first character outside [a-z0-9-], and trailing hyphens are
// dropped ("$pdf." and "$pdf-" name pdf); if that character is a word
// character ("$pdfX", "$pdf_x", "$PDF") the token is no mention at all.
func Mentions(text string, known func(string) bool) []string {
	var out []string
	seen := make(map[string]bool)
	for i := 0; i < len(text); i++ {
		if text[i] != '$' || !mentionStart(text[:i]) {
			continue
		}
		j := i + 1
		for j < len(text) && isSlugByte(text[j]) {
			j++
		}
		if j < len(text) {
			if r, _ := utf8.DecodeRuneInString(text[j:]); isWord(r) {
				i = j - 1
				continue
			}
		}
		name := strings.TrimRight(text[i+1:j], "-")
		i = j - 1
		if validSlug(name) && !seen[name] && known(name) {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// mentionStart reports whether a '$' after before may open a mention.
func mentionStart(before string) bool {
	if before == "" {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(before)
	return !isWord(r) && r != '$' && r != '/' && r != '\\'
}

// isWord reports whether r continues a word.
func isWord(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// isSlugByte reports whether b may appear in a slug.
func isSlugByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-'
}

// validSlug applies the package format's slug rule,
// ^[a-z0-9]+(-[a-z0-9]+)*$ and at most 64 characters.
func validSlug(s string) bool {
	if s == "" || len(s) > maxSlugLen || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isSlugByte(s[i]) {
			return false
		}
	}
	return true
}

// CommandPrefix opens a skill command in a message.
const CommandPrefix = "/skill:"

// Command is a skill invoked by a message as "/skill:slug args".
type Command struct {
	Slug string
	Args string // the rest of the command's line, trimmed; "" when none
}

// Commands returns the skills text invokes as commands, in order of first
// invocation and one per slug (the first command of a slug wins), keeping
// only slugs for which known returns true.
//
// A command is a line (lines end at "\n"; a "\r" before it is dropped) that
// starts, after spaces and tabs, with "/skill:" and a slug — lower-case
// letters, digits and single inner hyphens, at most 64 characters — ended
// by the end of the line or white space. Its arguments are the rest of that
// line with the white space around them trimmed; the lines after it
// are the message, not arguments. Anything else is no command: "/skill:PDF",
// "/skill:pdf.", "see /skill:pdf" in the middle of a line.
func Commands(text string, known func(string) bool) []Command {
	var out []Command
	seen := make(map[string]bool)
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		rest, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), CommandPrefix)
		if !ok {
			continue
		}
		end := strings.IndexFunc(rest, unicode.IsSpace)
		if end < 0 {
			end = len(rest)
		}
		slug := rest[:end]
		if !validSlug(slug) || seen[slug] || !known(slug) {
			continue
		}
		seen[slug] = true
		out = append(out, Command{Slug: slug, Args: strings.TrimSpace(rest[end:])})
	}
	return out
}
