package manifest

import (
	"errors"
	"path"
	"strings"
	"unicode/utf8"
)

// segPattern is one segment of a glob other than "**", compiled: it
// matches a path segment exactly as path.Match does, without path.Match's
// trial of every offset for every chunk.
//
// A pattern is chunks separated by runs of '*': lead says the first chunk
// follows a '*', trail that a '*' ends the pattern. The first chunk, when
// no '*' leads, must match at the segment's start; each chunk between two
// stars matches at its leftmost place after the one before it (any later
// place leaves less for the rest, so the leftmost is the one path.Match
// keeps too); the last chunk, when no '*' ends the pattern, must end at the
// segment's end, so it is tried only at the few offsets its width allows.
type segPattern struct {
	lead, trail bool
	chunks      []segChunk
	// fixed and perByte bound the work of one match of a segment of n
	// bytes: at most fixed + perByte*n steps (a step compares a byte,
	// decodes a rune, or tests a class range).
	fixed, perByte int
}

// segChunk is a run of pattern between stars: literals, '?' and classes.
type segChunk struct {
	elems []segElem
	// lit is the chunk when it is all literal (then found with
	// strings.Index); minW and maxW bound the bytes a match takes.
	lit        string
	isLit      bool
	minW, maxW int
	size       int // the pattern bytes of the chunk: what one attempt costs at most
}

// segElem is a literal string, a '?' (any one rune) or a class.
type segElem struct {
	kind   byte // 'l', '?', '['
	lit    string
	neg    bool
	ranges []rune    // lo, hi pairs
	ascii  [2]uint64 // the ASCII runes in the ranges, a bit each
}

var errBadSegment = errors.New("not a valid pattern")

// steps, when not nil, counts the steps matching takes (the tests hold
// them to Glob.Cost).
var steps *int64

func step(n int) {
	if steps != nil {
		*steps += int64(n)
	}
}

// compileSegment compiles a path.Match pattern of one segment.
func compileSegment(p string) (*segPattern, error) {
	if _, err := path.Match(p, ""); err != nil {
		return nil, errBadSegment
	}
	sp := &segPattern{}
	first := true
	for len(p) > 0 {
		star := false
		for len(p) > 0 && p[0] == '*' {
			p, star = p[1:], true
		}
		if first {
			sp.lead, first = star, false
		}
		if len(p) == 0 {
			sp.trail = star
			break
		}
		end := chunkEnd(p)
		c, err := compileChunk(p[:end])
		if err != nil {
			return nil, err
		}
		sp.chunks = append(sp.chunks, c)
		p = p[end:]
	}
	sp.fixed, sp.perByte = sp.cost()
	return sp, nil
}

// chunkEnd is where the chunk at the start of p ends: at the first '*'
// outside a class (path.Match's scanChunk).
func chunkEnd(p string) int {
	inrange := false
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 < len(p) {
				i++
			}
		case '[':
			inrange = true
		case ']':
			inrange = false
		case '*':
			if !inrange {
				return i
			}
		}
	}
	return len(p)
}

func compileChunk(p string) (segChunk, error) {
	c := segChunk{size: len(p)}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			c.elems = append(c.elems, segElem{kind: 'l', lit: lit.String()})
			c.minW += lit.Len()
			c.maxW += lit.Len()
			lit.Reset()
		}
	}
	for len(p) > 0 {
		switch p[0] {
		case '?':
			flush()
			c.elems = append(c.elems, segElem{kind: '?'})
			p = p[1:]
			c.minW, c.maxW = c.minW+1, c.maxW+utf8.UTFMax
		case '[':
			flush()
			e := segElem{kind: '['}
			p = p[1:]
			if len(p) > 0 && p[0] == '^' {
				e.neg, p = true, p[1:]
			}
			for n := 0; ; n++ {
				if len(p) > 0 && p[0] == ']' && n > 0 {
					p = p[1:]
					break
				}
				lo, rest, err := classRune(p)
				if err != nil {
					return c, err
				}
				hi := lo
				if rest[0] == '-' {
					if hi, rest, err = classRune(rest[1:]); err != nil {
						return c, err
					}
				}
				e.ranges = append(e.ranges, lo, hi)
				for r := lo; r <= min(hi, utf8.RuneSelf-1); r++ {
					e.ascii[r/64] |= 1 << (r % 64)
				}
				p = rest
			}
			c.elems = append(c.elems, e)
			c.minW, c.maxW = c.minW+1, c.maxW+utf8.UTFMax
		case '\\':
			if len(p) < 2 {
				return c, errBadSegment
			}
			lit.WriteByte(p[1])
			p = p[2:]
		default:
			lit.WriteByte(p[0])
			p = p[1:]
		}
	}
	flush()
	if len(c.elems) == 1 && c.elems[0].kind == 'l' {
		c.lit, c.isLit = c.elems[0].lit, true
	}
	return c, nil
}

// classRune reads one rune of a class, perhaps escaped (path.Match's
// getEsc): it may be neither '-' nor ']', and something must follow it.
func classRune(p string) (rune, string, error) {
	if len(p) == 0 || p[0] == '-' || p[0] == ']' {
		return 0, "", errBadSegment
	}
	if p[0] == '\\' {
		p = p[1:]
		if len(p) == 0 {
			return 0, "", errBadSegment
		}
	}
	r, n := utf8.DecodeRuneInString(p)
	if r == utf8.RuneError && n == 1 || len(p) == n {
		return 0, "", errBadSegment
	}
	return r, p[n:], nil
}

// cost is what one match costs at most: fixed steps, and perByte steps
// for each byte of the segment. Only a chunk between two stars with a '?'
// or a class costs per byte as much as its own size (it is tried at each
// offset); an all-literal one is found by strings.Index, in time linear in
// the segment; the first and the last chunk are tried at a fixed number of
// offsets.
func (sp *segPattern) cost() (fixed, perByte int) {
	fixed = 1
	for i, c := range sp.chunks {
		attempt := c.size + 1
		switch {
		case i == 0 && !sp.lead:
			fixed += attempt
		case i == len(sp.chunks)-1 && !sp.trail:
			fixed += (c.maxW - c.minW + 1) * attempt
		case c.isLit:
			fixed += attempt
			perByte++
		default:
			fixed += attempt
			perByte += attempt
		}
	}
	return fixed, perByte
}

// match reports whether the segment s (no '/' in it) matches, as
// path.Match(pattern, s) would.
func (sp *segPattern) match(s string) bool {
	step(1)
	chunks, pos := sp.chunks, 0
	if !sp.lead {
		if len(chunks) == 0 {
			return s == ""
		}
		n, ok := chunks[0].at(s, 0)
		if !ok {
			return false
		}
		if len(chunks) == 1 && !sp.trail {
			return n == len(s)
		}
		chunks, pos = chunks[1:], n
	}
	for i := range chunks {
		c := &chunks[i]
		if i == len(chunks)-1 && !sp.trail {
			return c.suffix(s, pos)
		}
		end, ok := c.find(s, pos)
		if !ok {
			return false
		}
		pos = end
	}
	return true
}

// at matches the chunk at offset k of s: where the match ends, and
// whether there is one.
func (c *segChunk) at(s string, k int) (int, bool) {
	for i := range c.elems {
		e := &c.elems[i]
		if e.kind == 'l' {
			step(len(e.lit))
			if !strings.HasPrefix(s[k:], e.lit) {
				return 0, false
			}
			k += len(e.lit)
			continue
		}
		step(1)
		if k == len(s) {
			return 0, false
		}
		if b := s[k]; b < utf8.RuneSelf {
			if e.kind == '?' && b == '/' || e.kind == '[' && (e.ascii[b/64]&(1<<(b%64)) != 0) == e.neg {
				return 0, false
			}
			k++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[k:])
		if e.kind == '[' {
			if step(len(e.ranges) / 2); e.inClass(r) == e.neg {
				return 0, false
			}
		}
		k += n
	}
	return k, true
}

func (e *segElem) inClass(r rune) bool {
	for i := 0; i < len(e.ranges); i += 2 {
		if e.ranges[i] <= r && r <= e.ranges[i+1] {
			return true
		}
	}
	return false
}

// find matches the chunk at its leftmost offset from pos: where the match
// ends, and whether there is one.
func (c *segChunk) find(s string, pos int) (int, bool) {
	if c.isLit {
		step(len(s) - pos + len(c.lit))
		i := strings.Index(s[pos:], c.lit)
		if i < 0 {
			return 0, false
		}
		return pos + i + len(c.lit), true
	}
	for k := pos; k+c.minW <= len(s); k++ {
		if end, ok := c.at(s, k); ok {
			return end, true
		}
	}
	return 0, false
}

// suffix says whether the chunk matches s from some offset at pos or after
// to s's very end: only offsets within its widths of the end can.
func (c *segChunk) suffix(s string, pos int) bool {
	for k := max(pos, len(s)-c.maxW); k+c.minW <= len(s); k++ {
		if end, ok := c.at(s, k); ok && end == len(s) {
			return true
		}
	}
	return false
}
