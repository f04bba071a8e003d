package skilltest

import (
	endian "encoding/binary"
	"testing"
)

// The signatures of the ZIP records the helpers below read and write.
const (
	centralHeaderSig = 0x02014b50
	endRecordSig     = 0x06054b50
	endRecordLen     = 22
	centralFixedLen  = 46
)

// ZipDirectory locates the central directory of an archive without a
// comment: its offset, size and entry count.
func ZipDirectory(tb testing.TB, data []byte) (off, size, count int) {
	tb.Helper()
	end := len(data) - endRecordLen
	if end < 0 || endian.LittleEndian.Uint32(data[end:]) != endRecordSig {
		tb.Fatal("no end of central directory record where expected")
	}
	return int(endian.LittleEndian.Uint32(data[end+16:])), int(endian.LittleEndian.Uint32(data[end+12:])),
		int(endian.LittleEndian.Uint16(data[end+10:]))
}

// CentralHeaders returns the central directory headers of an archive by
// entry name, and the names in the directory's order: each header starts
// at its signature and ends after its name, extra field and comment, and
// is a slice of data (a change to it changes the archive).
func CentralHeaders(tb testing.TB, data []byte) (names []string, headers map[string][]byte) {
	tb.Helper()
	off, _, count := ZipDirectory(tb, data)
	headers = map[string][]byte{}
	for i := 0; i < count; i++ {
		if endian.LittleEndian.Uint32(data[off:]) != centralHeaderSig {
			tb.Fatalf("no central header at %d", off)
		}
		n := int(endian.LittleEndian.Uint16(data[off+28:]))
		m := int(endian.LittleEndian.Uint16(data[off+30:]))
		k := int(endian.LittleEndian.Uint16(data[off+32:]))
		name := string(data[off+centralFixedLen : off+centralFixedLen+n])
		names = append(names, name)
		headers[name] = data[off : off+centralFixedLen+n+m+k]
		off += centralFixedLen + n + m + k
	}
	return names, headers
}

// PatchEntry lets fn change the central header of the entry called name and
// its local header (from its signature to the end of data), in place (same
// lengths). It returns data.
func PatchEntry(tb testing.TB, data []byte, name string, fn func(central, local []byte)) []byte {
	tb.Helper()
	_, headers := CentralHeaders(tb, data)
	c, ok := headers[name]
	if !ok {
		tb.Fatalf("no entry %q", name)
	}
	lo := int(endian.LittleEndian.Uint32(c[42:]))
	fn(c, data[lo:])
	return data
}

// EntryData returns the stored (compressed) bytes of an entry, in place.
func EntryData(tb testing.TB, data []byte, name string) []byte {
	tb.Helper()
	_, headers := CentralHeaders(tb, data)
	c, ok := headers[name]
	if !ok {
		tb.Fatalf("no entry %q", name)
	}
	lo := int(endian.LittleEndian.Uint32(c[42:]))
	n := int(endian.LittleEndian.Uint16(data[lo+26:]))
	m := int(endian.LittleEndian.Uint16(data[lo+28:]))
	size := int(endian.LittleEndian.Uint32(c[20:]))
	return data[lo+30+n+m : lo+30+n+m+size]
}

// RebuildDirectory replaces the central directory of data with headers,
// renamed as given, and a new end record. Each header keeps pointing where
// it pointed: several names can share one local header and its data (the
// overlapping-entries bomb).
func RebuildDirectory(tb testing.TB, data []byte, headers [][]byte, names []string) []byte {
	tb.Helper()
	off, _, _ := ZipDirectory(tb, data)
	out := append([]byte(nil), data[:off]...)
	for i, h := range headers {
		n := int(endian.LittleEndian.Uint16(h[28:]))
		nh := append([]byte(nil), h[:centralFixedLen]...)
		endian.LittleEndian.PutUint16(nh[28:], uint16(len(names[i])))
		nh = append(nh, names[i]...)
		nh = append(nh, h[centralFixedLen+n:]...)
		out = append(out, nh...)
	}
	size := len(out) - off
	end := make([]byte, endRecordLen)
	endian.LittleEndian.PutUint32(end[0:], endRecordSig)
	endian.LittleEndian.PutUint16(end[8:], uint16(len(headers)))
	endian.LittleEndian.PutUint16(end[10:], uint16(len(headers)))
	endian.LittleEndian.PutUint32(end[12:], uint32(size))
	endian.LittleEndian.PutUint32(end[16:], uint32(off))
	return append(out, end...)
}
