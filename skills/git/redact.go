package git

import (
	"net/url"
	"strings"

	"skillfs/skills"
)

// Hidden stands for a credential wherever a URL is shown, logged or
// recorded.
const Hidden = "xxxxx"

// secretParamWords make a URL parameter secret when its name holds one of
// them, in any case: access_token, private_token, client_secret, password,
// api_key, sig, signature, X-Amz-Credential, auth… A parameter hidden that
// held nothing secret costs a less useful message, one shown that did costs
// the secret, so the words are broad.
var secretParamWords = []string{"token", "secret", "passw", "pwd", "key", "sig", "auth", "credential"}

// secretParamNames are names of secret parameters that hold none of
// secretParamWords.
var secretParamNames = []string{"pass", "code"}

// secretParamPrefixes make every parameter of a signed request secret: a
// presigned S3 or Cloud Storage URL is a credential as a whole.
var secretParamPrefixes = []string{"x-amz-", "x-goog-"}

// SecretParam reports whether a URL parameter named name (as written or
// percent-encoded) carries a secret, so that its value is never shown: a
// name holding token, secret, passw, pwd, key, sig, auth or credential,
// the names pass and code, and every name starting with x-amz- or x-goog-,
// in any case.
func SecretParam(name string) bool {
	k := strings.ToLower(skills.PercentDecode(name))
	for _, p := range secretParamPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	for _, w := range secretParamWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	for _, n := range secretParamNames {
		if k == n {
			return true
		}
	}
	return false
}

// querySpan returns where the query of raw, a URL with "://" (or
// scheme-relative "//"), starts (after its '?') and whether it has one.
// The '?' is looked for after the user information, where a password
// may hold one.
func querySpan(raw string) (int, bool) {
	start := userinfoEnd(raw)
	if start == 0 {
		switch i := strings.Index(raw, "://"); {
		case i >= 0:
			start = i + 3
		case strings.HasPrefix(raw, "//"):
			start = 2
		default:
			return 0, false
		}
	}
	q := strings.IndexByte(raw[start:], '?')
	if q < 0 {
		return 0, false
	}
	return start + q + 1, true
}

// queryParams calls fn with each parameter of a query, as written: its
// name and value. '&' and ';' both end a parameter (servers split at
// either).
func queryParams(query string, fn func(name, value string)) {
	for _, p := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		name, value, _ := strings.Cut(p, "=")
		fn(name, value)
	}
}

// redactQuery hides the value of every secret parameter (see SecretParam)
// of the query of raw, a URL; the rest stays as written.
func redactQuery(raw string) string {
	start, ok := querySpan(raw)
	if !ok {
		return raw
	}
	var b strings.Builder
	b.WriteString(raw[:start])
	query := raw[start:]
	for len(query) > 0 {
		end := strings.IndexAny(query, "&;")
		if end < 0 {
			end = len(query)
		}
		p := query[:end]
		if name, value, hasValue := strings.Cut(p, "="); hasValue && value != "" && value != Hidden && SecretParam(name) {
			p = name + "=" + Hidden
		}
		b.WriteString(p)
		if end < len(query) {
			b.WriteByte(query[end])
			end++
		}
		query = query[end:]
	}
	return b.String()
}

// querySecrets lists the values of the secret parameters of raw's query.
func querySecrets(raw string) []string {
	start, ok := querySpan(raw)
	if !ok {
		return nil
	}
	var out []string
	queryParams(raw[start:], func(name, value string) {
		if value != "" && SecretParam(name) {
			out = append(out, value)
		}
	})
	return out
}

// secretForms lists v as written, percent-decoded and percent-encoded:
// every way a message may spell it.
func secretForms(v string) []string {
	if v == "" || v == Hidden {
		return nil
	}
	s := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	if d := skills.PercentDecode(v); d != v {
		s = append(s, d)
	}
	return s
}
