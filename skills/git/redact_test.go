package git

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"skillfs/skills"
)

// TestCredentialsBeforeParsing: a '#', '?', '@' or ':' in a password stays
// in the URL's user information, which is hidden, and never becomes the
// ref, the folder or a query; the ref and folder after the password are
// still read; secret query parameters are hidden wherever a source is
// shown.
func TestCredentialsBeforeParsing(t *testing.T) {
	for _, tc := range []struct {
		in, shown string
		parsed    Source // as ParseGitSource reads in
	}{
		{"https://user:pa#ssw0rd@host/x.git", "https://xxxxx@host/x.git",
			Source{URL: "https://user:pa#ssw0rd@host/x.git"}},
		{"https://user:pa#ssw0rd@host/x.git#main:skills/a", "https://xxxxx@host/x.git#main:skills/a",
			Source{URL: "https://user:pa#ssw0rd@host/x.git", Ref: "main", Path: "skills/a"}},
		{"https://user:p#a:s?s@w#rd@127.0.0.1:1/x.git#v1", "https://xxxxx@127.0.0.1:1/x.git#v1",
			Source{URL: "https://user:p#a:s?s@w#rd@127.0.0.1:1/x.git", Ref: "v1"}},
		{"ssh://git:s3#cr3t@host:2222/o/r.git#main", "ssh://git:xxxxx@host:2222/o/r.git#main",
			Source{URL: "ssh://git:s3#cr3t@host:2222/o/r.git", Ref: "main"}},
		{"https://host/x.git?access_token=T0KEN-SECRET", "https://host/x.git?access_token=xxxxx",
			Source{URL: "https://host/x.git?access_token=T0KEN-SECRET"}},
		{"https://host/x.git?ref=a&private_token=T0KEN-SECRET;sig=S1G#main", "https://host/x.git?ref=a&private_token=xxxxx;sig=xxxxx#main",
			Source{URL: "https://host/x.git?ref=a&private_token=T0KEN-SECRET;sig=S1G", Ref: "main"}},
		{"https://b.s3.example/x.zip?X-Amz-Credential=AK%2F1&X-Amz-Signature=abcd&v=2", "https://b.s3.example/x.zip?X-Amz-Credential=xxxxx&X-Amz-Signature=xxxxx&v=2",
			Source{URL: "https://b.s3.example/x.zip?X-Amz-Credential=AK%2F1&X-Amz-Signature=abcd&v=2"}},
		{"https://u:pw?x=1@host/r.git?token=t0k#main", "https://xxxxx@host/r.git?token=xxxxx#main",
			Source{URL: "https://u:pw?x=1@host/r.git?token=t0k", Ref: "main"}},
	} {
		if got := ParseSource(tc.in); got != tc.parsed {
			t.Errorf("ParseGitSource(%q) = %+v, want %+v", tc.in, got, tc.parsed)
		}
		if got := ParseSpec(tc.in).String(); got != tc.shown {
			t.Errorf("ParseSpec(%q).String() = %q, want %q", tc.in, got, tc.shown)
		}
		if got := ParseSource(tc.in).String(); got != tc.shown {
			t.Errorf("String of %q = %q, want %q", tc.in, got, tc.shown)
		}
		if back := ParseSource(tc.parsed.Spec()); back != tc.parsed {
			t.Errorf("ParseGitSource(%q), of Spec, = %+v, want %+v", tc.parsed.Spec(), back, tc.parsed)
		}
		if !ParseSpec(tc.in).HasCredentials() {
			t.Errorf("ParseSpec(%q).HasCredentials() = false", tc.in)
		}
		if ParseSpec(tc.shown).String() != tc.shown || ParseSpec(tc.shown).HasCredentials() {
			t.Errorf("%q, redacted already, is seen to carry credentials", tc.shown)
		}
	}
	// What holds no secret is shown as written.
	for _, in := range []string{"https://host/x.git?ref=main&depth=1", "https://host/x.git#v1@2", "/srv/r?token=x", "git@host:o/r.git#main",
		"https://host/x.git?token=", "https://host/x.git?token"} {
		if got := ParseSpec(in).String(); got != in || ParseSpec(in).HasCredentials() {
			t.Errorf("ParseSpec(%q).String() = %q (credentials %v), want it unchanged", in, got, ParseSpec(in).HasCredentials())
		}
	}
	// The secrets a clone's messages are scrubbed of.
	got := gitSecrets("https://u:a#b@host/x.git?access_token=t%2Bk&x=1")
	for _, want := range []string{"a#b", "a%23b", "u", "t%2Bk", "t+k"} {
		if !slices.Contains(got, want) {
			t.Errorf("gitSecrets lacks %q: %q", want, got)
		}
	}
	if slices.Contains(got, "1") {
		t.Errorf("gitSecrets holds a parameter that is not secret: %q", got)
	}
}

func TestSecretParam(t *testing.T) {
	for _, name := range []string{"access_token", "token", "private_token", "PRIVATE-TOKEN", "oauth_token", "password", "passwd", "pwd", "pass",
		"secret", "client_secret", "key", "api_key", "apikey", "sig", "signature", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Date",
		"x-goog-signature", "auth", "code", "access%5Ftoken", "sslpassword"} {
		if !SecretParam(name) {
			t.Errorf("SecretParam(%q) = false", name)
		}
	}
	for _, name := range []string{"ref", "v", "depth", "sslmode", "application_name", "branch", "passfile", "format"} {
		if SecretParam(name) {
			t.Errorf("SecretParam(%q) = true", name)
		}
	}
}

// FuzzCredentialsNeverShown: for any URL with a password (and any secret
// query parameter), with or without a ref and a folder, neither the
// redacted source, nor what ParseSource reads as the ref and folder,
// nor the errors of the checks made before git runs hold the password or
// any part of it of 4 bytes or more that holds a letter or digit. They
// are the same for the password with its letters and digits changed, so
// none of it shows. (A '/' in a password ends the host part in every URL
// parser, git's included, and must be written %2F: it is left out.)
func FuzzCredentialsNeverShown(f *testing.F) {
	f.Add(uint8(0), "user", "pa#ssw0rd", "host", "/x.git", "", "", "", "")
	f.Add(uint8(0), "user", "pa#ssw0rd", "127.0.0.1:1", "/x.git", "", "", "main", "skills/x")
	f.Add(uint8(2), "git", "s3#c:r?e@t", "host:22", "/o/r", "", "", "v1", "")
	f.Add(uint8(1), "u", "p", "host", "/x.git", "access_token", "T0KEN#x", "", "")
	f.Add(uint8(0), "", "xxxxx", "h", "", "X-Amz-Signature", "abcdef", "#", ":")
	f.Add(uint8(3), "u", "\x01secret", "h", "/r", "token", "t0k3n5", "ref..", "../x")
	f.Add(uint8(0), "u", "main", "h", "/r", "", "", "main", "")
	rules := []gitRewrite{{base: "file:///srv/mirror/", prefix: "https://github.com/"}, {base: "/srv/plain/", prefix: "https://host/"}}
	schemes := []string{"https", "http", "ssh", "git", "git+ssh", "file", "HTTPS", "ftp"}
	f.Fuzz(func(t *testing.T, scheme uint8, user, pass, host, path, qname, qvalue, ref, sub string) {
		user = strings.Map(dropRunes("/@:"), user)
		pass = strings.Map(dropRunes("/"), pass)
		host = strings.Map(dropRunes("/@#?"), host)
		path = "/" + strings.Map(dropRunes("#?"), path)
		qname = strings.Map(dropRunes("=&;#"), qname)
		qvalue = strings.Map(dropRunes("&;#"), qvalue)
		ref, sub = strings.Map(dropRunes("#"), ref), strings.Map(dropRunes("#"), sub)
		if pass == "" || pass == Hidden || qvalue == Hidden {
			return // nothing to hide, or hidden already
		}
		qsecret := qvalue != "" && SecretParam(qname)
		source := func(pass, qvalue string) string {
			s := schemes[int(scheme)%len(schemes)] + "://" + user + ":" + pass + "@" + host + path
			if qname != "" {
				s += "?" + qname + "=" + qvalue
			}
			if ref != "" || sub != "" {
				s += "#" + ref
				if sub != "" {
					s += ":" + sub
				}
			}
			return s
		}
		other := otherAlnum(pass)
		otherQ := qvalue
		if qsecret {
			otherQ = otherAlnum(qvalue)
		}
		got, want := shownOf(source(pass, qvalue), rules), shownOf(source(other, otherQ), rules)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q shows what depends on its secrets:\n%q\nwith other secrets:\n%q", source(pass, qvalue), got[i], want[i])
			}
		}
		secrets := []string{pass}
		if qsecret {
			secrets = append(secrets, qvalue)
		}
		for _, sec := range secrets {
			for _, part := range partsOf(sec, 4) {
				for i, text := range got {
					if strings.Contains(text, part) && !strings.Contains(want[i], part) {
						t.Fatalf("%q shows %q of its secret %q: %q", source(pass, qvalue), part, sec, text)
					}
				}
			}
		}
	})
}

// shownOf is what may be shown of the source s: the source redacted, the
// source as parsed and shown again, the ref and folder read from it, the
// refusal of a curated source, and the errors of the checks before a
// clone, with the rewrite rules given.
func shownOf(s string, rules []gitRewrite) []string {
	g := ParseSource(s)
	out := []string{ParseSpec(s).String(), g.String(), g.Ref, g.Path, errText(ParseSpec(s).RefuseCredentials("curated source"))}
	_, _, err := checkGitSource(g, rules)
	out = append(out, errText(err))
	if err != nil && !errors.Is(err, skills.ErrInvalid) {
		out = append(out, "not ErrInvalid: "+err.Error())
	}
	if r, ok := ParseRemoteName(s); ok {
		out = append(out, r.String(), r.Ref, r.Path)
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// dropRunes is a strings.Map function that drops the runes of cut.
func dropRunes(cut string) func(rune) rune {
	return func(r rune) rune {
		if strings.ContainsRune(cut, r) {
			return -1
		}
		return r
	}
}

// otherAlnum is s with every ASCII letter and digit changed (to 'Q', or
// 'Z' for a 'Q'): the same shape, other secrets.
func otherAlnum(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b[i] = 'Q'
			if c == 'Q' {
				b[i] = 'Z'
			}
		}
	}
	return string(b)
}

// partsOf lists the substrings of s of n bytes that hold an ASCII letter
// or digit: a longer part of s shown shows these.
func partsOf(s string, n int) []string {
	var out []string
	for i := 0; i+n <= len(s); i++ {
		if p := s[i : i+n]; otherAlnum(p) != p {
			out = append(out, p)
		}
	}
	return out
}
