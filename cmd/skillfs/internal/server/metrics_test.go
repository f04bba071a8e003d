package server

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"skillfs/skills"
)

// TestImportOutcomesAreErrorCodes: the outcome an import's status names is
// the code the API's error body carries for it, and one of those counted
// from the start.
func TestImportOutcomesAreErrorCodes(t *testing.T) {
	for _, err := range []error{nil, skills.ErrNotFound, skills.ErrPermission, skills.ErrExists, skills.ErrAmbiguous,
		skills.ErrInvalid, skills.ErrLimit, skills.ErrDamaged, errors.New("anything else")} {
		code, status := "ok", http.StatusOK
		if err != nil {
			code, status = ErrorCode(err)
		}
		if got := outcomeOf(status); got != code || !slices.Contains(importOutcomes, got) {
			t.Errorf("%v: status %d is outcome %q, want %q among %v", err, status, got, code, importOutcomes)
		}
	}
}
