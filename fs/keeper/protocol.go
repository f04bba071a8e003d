// Package keeper keeps the descriptors of FUSE connections in a process of
// their own, so that a connection outlives the daemon serving it: while the
// keeper holds a duplicate of a connection's /dev/fuse descriptor, the
// kernel does not end the connection when the daemon dies, and the next
// daemon takes the descriptor back (fs.Options.Keeper). Serve is the holder
// (`skillfs keeper`); Client, made by Dial, is the fs.Keeper a daemon
// mounts with.
//
// # Protocol
//
// The holder listens on a Unix socket of type SOCK_SEQPACKET, mode 0600:
// one packet is one message, and a descriptor travels in the packet that
// names it (SCM_RIGHTS). Every peer is checked when it connects
// (SO_PEERCRED): root, or the holder's own user; anyone else is answered an
// error and the connection closed. A request is
//
//	byte 0     version: 1
//	byte 1     operation: 'P' put, 'T' take, 'D' drop, 'L' list
//	byte 2     n, the length of the name (0 for list, 1 to 255 otherwise)
//	n bytes    the name: UTF-8, no control characters
//
// A put carries exactly one descriptor, the others none. A reply is
//
//	byte 0     version: 1
//	byte 1     status: 'K' done, 'N' nothing is kept under the name (take),
//	           'L' the names kept, 'E' refused
//	bytes 2-3  the length of the payload, big-endian
//	payload    'L': the names, each followed by '\n'; 'E': what was wrong
//
// A take answered 'K' carries the descriptor (the holder keeps its own). A
// drop of a name not kept is done. A packet that is not exactly a request —
// another version, an unknown operation, a length that does not match, a
// bad name, descriptors where none belong, a truncated packet — is answered
// 'E' saying what is wrong, and the connection is closed.
//
// The holder trusts no stated type: a descriptor put is kept only if it is
// the FUSE device (a character device 10:229) and a live connection of it
// (poll does not report it ended). It keeps at most MaxKept descriptors and
// serves at most maxConns connections at a time; it drops, and logs, any
// connection that has ended (unmounted, aborted).
package keeper

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// version is the protocol's version, the first byte of every message.
const version = 1

// Operations of a request.
const (
	opPut  = 'P'
	opTake = 'T'
	opDrop = 'D'
	opList = 'L'
)

// Statuses of a reply.
const (
	stDone  = 'K'
	stNone  = 'N'
	stList  = 'L'
	stError = 'E'
)

const (
	// MaxName bounds a name's length in bytes.
	MaxName = 255
	// MaxKept bounds the descriptors one holder keeps.
	MaxKept = 64
	// maxRequest is the largest request: header and name.
	maxRequest = 3 + MaxName
	// maxPayload bounds a reply's payload: every name kept, or an error.
	maxPayload = MaxKept * (MaxName + 1)
	// maxReply is the largest reply.
	maxReply = 4 + maxPayload
)

// errMalformed marks a message that is not one of the protocol.
var errMalformed = errors.New("malformed message")

// request is a parsed request.
type request struct {
	op   byte
	name string
}

// checkName says what is wrong with a name, if anything.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) > MaxName:
		return fmt.Errorf("name of %d bytes, at most %d", len(name), MaxName)
	case !utf8.ValidString(name):
		return fmt.Errorf("name %q is not UTF-8", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("name %q holds a control character", name)
		}
	}
	return nil
}

// parseRequest parses one request packet; fds is how many descriptors came
// with it.
func parseRequest(b []byte, fds int) (request, error) {
	if len(b) < 3 {
		return request{}, fmt.Errorf("%w: %d bytes, a request has at least 3", errMalformed, len(b))
	}
	if b[0] != version {
		return request{}, fmt.Errorf("%w: version %d, this keeper speaks %d", errMalformed, b[0], version)
	}
	r := request{op: b[1]}
	n := int(b[2])
	if len(b) != 3+n {
		return request{}, fmt.Errorf("%w: the name's length says %d bytes, %d follow", errMalformed, n, len(b)-3)
	}
	r.name = string(b[3:])
	switch r.op {
	case opList:
		if n != 0 {
			return request{}, fmt.Errorf("%w: a list names nothing", errMalformed)
		}
	case opPut, opTake, opDrop:
		if err := checkName(r.name); err != nil {
			return request{}, fmt.Errorf("%w: %v", errMalformed, err)
		}
	default:
		return request{}, fmt.Errorf("%w: unknown operation %q", errMalformed, r.op)
	}
	switch want := 0; {
	case r.op == opPut && fds != 1:
		return request{}, fmt.Errorf("%w: a put carries one descriptor, this one %d", errMalformed, fds)
	case r.op != opPut && fds != want:
		return request{}, fmt.Errorf("%w: %q carries no descriptor, this one %d", errMalformed, r.op, fds)
	}
	return r, nil
}

// encodeRequest makes the packet of a request.
func encodeRequest(op byte, name string) ([]byte, error) {
	if op != opList {
		if err := checkName(name); err != nil {
			return nil, err
		}
	}
	return append([]byte{version, op, byte(len(name))}, name...), nil
}

// reply is a parsed reply.
type reply struct {
	status  byte
	payload []byte
}

// parseReply parses one reply packet; fds is how many descriptors came
// with it.
func parseReply(b []byte, fds int) (reply, error) {
	if len(b) < 4 {
		return reply{}, fmt.Errorf("%w: %d bytes, a reply has at least 4", errMalformed, len(b))
	}
	if b[0] != version {
		return reply{}, fmt.Errorf("%w: version %d, this client speaks %d", errMalformed, b[0], version)
	}
	r := reply{status: b[1]}
	n := int(binary.BigEndian.Uint16(b[2:4]))
	if n > maxPayload || len(b) != 4+n {
		return reply{}, fmt.Errorf("%w: the payload's length says %d bytes, %d follow (at most %d)", errMalformed, n, len(b)-4, maxPayload)
	}
	r.payload = b[4:]
	switch r.status {
	case stDone, stNone, stError:
	case stList:
		if _, err := parseNames(r.payload); err != nil {
			return reply{}, err
		}
	default:
		return reply{}, fmt.Errorf("%w: unknown status %q", errMalformed, r.status)
	}
	if fds > 1 || (fds == 1 && r.status != stDone) {
		return reply{}, fmt.Errorf("%w: a %q reply with %d descriptors", errMalformed, r.status, fds)
	}
	return r, nil
}

// parseNames parses a list's payload.
func parseNames(p []byte) ([]string, error) {
	var names []string
	for len(p) > 0 {
		i := 0
		for i < len(p) && p[i] != '\n' {
			i++
		}
		if i == len(p) {
			return nil, fmt.Errorf("%w: a name of the list is not ended by a newline", errMalformed)
		}
		name := string(p[:i])
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("%w: %v", errMalformed, err)
		}
		names = append(names, name)
		p = p[i+1:]
	}
	if len(names) > MaxKept {
		return nil, fmt.Errorf("%w: %d names, a keeper keeps at most %d", errMalformed, len(names), MaxKept)
	}
	return names, nil
}

// encodeReply makes the packet of a reply; a payload too long is cut.
func encodeReply(status byte, payload []byte) []byte {
	if len(payload) > maxPayload {
		payload = payload[:maxPayload]
	}
	b := []byte{version, status, 0, 0}
	binary.BigEndian.PutUint16(b[2:], uint16(len(payload)))
	return append(b, payload...)
}
