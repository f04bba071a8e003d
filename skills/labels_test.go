package skills

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckSessionKey(t *testing.T) {
	for _, c := range []struct {
		key string
		bad bool
	}{
		{key: "thread-1"},
		{key: "slack:C0123/1700000000.123456"},
		{key: "6f1c3b0e-1a2b-4c5d-8e9f-0a1b2c3d4e5f"},
		{key: strings.Repeat("k", MaxSessionKeyLen)},
		{key: "", bad: true},
		{key: strings.Repeat("k", MaxSessionKeyLen+1), bad: true},
		{key: "a b", bad: true},
		{key: "a\nb", bad: true},
		{key: "é", bad: true},
		{key: "a\x00", bad: true},
	} {
		err := CheckSessionKey(c.key)
		if (err != nil) != c.bad {
			t.Errorf("CheckSessionKey(%q) = %v, want bad %v", c.key, err, c.bad)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckSessionKey(%q) = %v, want ErrInvalid", c.key, err)
		}
	}
}

func TestParseLabel(t *testing.T) {
	for _, c := range []struct {
		in, key, value string
		bad            string // part of the error
	}{
		{in: "team=search", key: "team", value: "search"},
		{in: "app.example/thread=T-1", key: "app.example/thread", value: "T-1"},
		{in: "expr=a=b", key: "expr", value: "a=b"},
		{in: "empty=", key: "empty"},
		{in: "noequals", bad: "want KEY=VALUE"},
		{in: "=v", bad: "want 1 to 63"},
		{in: "-x=v", bad: "start and end"},
		{in: "x.=v", bad: "start and end"},
		{in: "a b=v", bad: "not a letter"},
		{in: "k=a b", bad: "not printable"},
		{in: strings.Repeat("k", MaxLabelKeyLen+1) + "=v", bad: "want 1 to 63"},
		{in: "k=" + strings.Repeat("v", MaxLabelValueLen+1), bad: "at most 256"},
	} {
		k, v, err := ParseLabel(c.in)
		switch {
		case c.bad != "":
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("ParseLabel(%q) = %v, want ErrInvalid saying %q", c.in, err, c.bad)
			}
		case err != nil || k != c.key || v != c.value:
			t.Errorf("ParseLabel(%q) = %q, %q, %v; want %q, %q", c.in, k, v, err, c.key, c.value)
		}
	}
}

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels([]string{"a=1", "b=2"})
	if err != nil || len(got) != 2 || got["a"] != "1" || got["b"] != "2" {
		t.Fatalf("ParseLabels = %v, %v", got, err)
	}
	if _, err := ParseLabels([]string{"a=1", "a=2"}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a label given twice: %v", err)
	}
	many := make([]string, MaxLabels+1)
	for i := range many {
		many[i] = "k" + strings.Repeat("x", i) + "=v"
	}
	if _, err := ParseLabels(many); err == nil || !errors.Is(err, ErrInvalid) {
		t.Errorf("%d labels: %v", len(many), err)
	}
	if got, err := ParseLabels(nil); got != nil || err != nil {
		t.Errorf("no labels: %v, %v", got, err)
	}
}

func FuzzParseLabel(f *testing.F) {
	for _, s := range []string{"a=b", "a.b/c=d=e", "=", "a=", "-a=b", "a b=c", "a=\x00", "k=é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, v, err := ParseLabel(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseLabel(%q): %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		if k+"="+v != s || CheckLabel(k, v) != nil || strings.Contains(k, "=") {
			t.Fatalf("ParseLabel(%q) = %q, %q", s, k, v)
		}
		for i := 0; i < len(v); i++ {
			if v[i] <= ' ' || v[i] > '~' {
				t.Fatalf("ParseLabel(%q): value byte %q accepted", s, v[i])
			}
		}
	})
}

func FuzzCheckSessionKey(f *testing.F) {
	for _, s := range []string{"t", "a b", "", "thread:1/2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckSessionKey(s) != nil {
			return
		}
		if s == "" || len(s) > MaxSessionKeyLen || strings.ContainsAny(s, " \t\r\n\x00") {
			t.Fatalf("CheckSessionKey(%q) accepted it", s)
		}
	})
}
