package skills

import (
	"errors"
	"net/http"
	"strings"
	"syscall"
)

// Kind is how every interface reports one kind of error: the CLI's exit
// code, the API's HTTP status and "code", and the errno a reader of the
// mount gets.
type Kind struct {
	Name  string        // the API's "code"
	Exit  int           // the CLI's exit code
	HTTP  int           // the API's status
	Errno syscall.Errno // what a FUSE caller sees
}

// ExitClass is one exit code shared by several error kinds, with its
// meaning as the README's exit-code table states it.
type ExitClass struct {
	Name    string
	Exit    int
	HTTP    int
	Meaning string
}

// The error classes. Exit codes are never reused.
var (
	ClassInternal = ExitClass{"internal", 1, http.StatusInternalServerError,
		"failure not listed below; for `skill validate`: the package is invalid"}
	ClassNotFound = ExitClass{"not_found", 3, http.StatusNotFound,
		"not found: skill, user, session, file or source"}
	ClassPermission = ExitClass{"permission", 4, http.StatusForbidden,
		"permission denied for the acting user"}
	ClassInvalid = ExitClass{"invalid", 5, http.StatusBadRequest,
		"bad input: no or invalid `SKILL.md`, unsafe path, special file, a limit hit, a bad dependency"}
	ClassConflict = ExitClass{"conflict", 6, http.StatusConflict,
		"conflict: already exists, the source holds several skills and none was chosen, a version prefix matches several versions, or the session is served by another host"}
	ClassUnavailable = ExitClass{"unavailable", 9, http.StatusServiceUnavailable,
		"the shared index (PostgreSQL) cannot be reached: nothing was changed; sessions already served keep serving, try again when it is back"}
	ClassBusy = ExitClass{"busy", 10, http.StatusServiceUnavailable,
		"the daemon is at one of its limits (event streams, memory for comparing versions, reads of sandbox paths): nothing was done; try again in a moment (the API says when in Retry-After)"}
	ClassDamaged = ExitClass{"damaged", 8, http.StatusServiceUnavailable,
		"the data directory is damaged or inconsistent (index missing, empty, unreadable or from another data directory beside published content): nothing was changed; see `skillfs check`, repair with `skillfs check --repair`"}
)

// Classes lists the classes in exit-code order.
var Classes = []ExitClass{ClassInternal, ClassNotFound, ClassPermission, ClassInvalid, ClassConflict, ClassDamaged, ClassUnavailable, ClassBusy}

// ErrorKind is one row of the table: a sentinel error, its class and the
// errno it becomes (an errno is finer than a class).
type ErrorKind struct {
	Err   error
	Class ExitClass
	Errno syscall.Errno
}

// Kinds maps every sentinel error of the package to how it is reported.
// The first row whose error an error wraps decides, so a damaged data
// directory wins over what failed because of it. Within a class the first
// row is the error the class's API code turns back into (CodeError).
var Kinds = []ErrorKind{
	{ErrDamaged, ClassDamaged, syscall.EIO},
	{ErrUnavailable, ClassUnavailable, syscall.EAGAIN},
	{ErrBusy, ClassBusy, syscall.EBUSY},
	{ErrNotFound, ClassNotFound, syscall.ENOENT},
	{ErrPermission, ClassPermission, syscall.EACCES},
	{ErrExists, ClassConflict, syscall.EEXIST},
	{ErrAmbiguous, ClassConflict, syscall.EIO},
	{ErrAmbiguousVersion, ClassConflict, syscall.EIO},
	{ErrElsewhere, ClassConflict, syscall.EREMOTE},
	{ErrInvalid, ClassInvalid, syscall.EINVAL},
	{ErrUnsafePath, ClassInvalid, syscall.EACCES},
	{ErrSpecialFile, ClassInvalid, syscall.EACCES},
	{ErrLimit, ClassInvalid, syscall.EFBIG},
	{ErrInvalidManifest, ClassInvalid, syscall.EIO},
	{ErrDependency, ClassInvalid, syscall.EIO},
	{ErrNoManifest, ClassInvalid, syscall.EIO},
}

// KindOf says how err is reported. ok is false when err wraps none of the
// package's sentinels; the Kind is then the internal one (exit 1, HTTP
// 500, EIO). nil has the zero Kind.
func KindOf(err error) (k Kind, ok bool) {
	if err == nil {
		return Kind{}, true
	}
	for _, row := range Kinds {
		if errors.Is(err, row.Err) {
			return row.kind(), true
		}
	}
	return ErrorKind{nil, ClassInternal, syscall.EIO}.kind(), false
}

func (r ErrorKind) kind() Kind {
	return Kind{Name: r.Class.Name, Exit: r.Class.Exit, HTTP: r.Class.HTTP, Errno: r.Errno}
}

// CodeError turns an API error code back into the first sentinel of its
// class, or nil for a code that names none.
func CodeError(code string) error {
	for _, row := range Kinds {
		if row.Class.Name == code {
			return row.Err
		}
	}
	return nil
}

// UnavailableSays is how the API and the command line begin the message of
// an error of the unavailable kind, whatever words of a driver follow.
const UnavailableSays = "the shared index cannot be reached, nothing was changed (sessions already served keep serving; try again when it is back)"

// Message is err's message as the API and the command line report it: one
// of the unavailable kind begins with UnavailableSays, once.
func Message(err error) string {
	msg := err.Error()
	if errors.Is(err, ErrUnavailable) && !strings.HasPrefix(msg, UnavailableSays) {
		return UnavailableSays + ": " + msg
	}
	return msg
}
