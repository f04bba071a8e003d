package source

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// FuzzTextWriter: however content is cut into writes, it passes exactly
// when it is UTF-8 without NUL, and then passes unchanged.
func FuzzTextWriter(f *testing.F) {
	f.Add([]byte("naïve café 日本語 🎉"), uint8(1))
	f.Add([]byte("caf\xc3"), uint8(2))
	f.Add([]byte("a\x00b"), uint8(3))
	f.Add([]byte("\xf0\x9f\x8e"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		if chunk == 0 {
			chunk = 1
		}
		var out bytes.Buffer
		tw := &textWriter{w: &out, rel: "f.md", max: 1 << 20}
		var err error
		for i := 0; i < len(data) && err == nil; i += int(chunk) {
			_, err = tw.Write(data[i:min(i+int(chunk), len(data))])
		}
		if err == nil {
			err = tw.finish()
		}
		want := utf8.Valid(data) && bytes.IndexByte(data, 0) < 0
		if (err == nil) != want {
			t.Fatalf("%q in chunks of %d: err %v, want valid=%v", data, chunk, err, want)
		}
		if err == nil && !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("passed %q, wrote %q", data, out.Bytes())
		}
	})
}
