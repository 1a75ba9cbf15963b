package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/panics"
)

// TestCompileError: what the compiler refuses in a valid tree is a 422
// naming the node; a panic's text stays in the log; anything else (a tree
// that does not validate) is left to the store.
func TestCompileError(t *testing.T) {
	t.Parallel()
	err := compileError(&tree.CompileError{Path: []string{"root", "tenant", "rules"}, Err: errors.New("unsupported thing")})
	e, ok := errors.AsType[*Error](err)
	if !ok || e.Status != http.StatusUnprocessableEntity || e.Code != "TREE_DOES_NOT_COMPILE" || e.Params["NODE"] != "root.tenant.rules" ||
		!strings.Contains(e.Message, "unsupported thing") || !strings.Contains(e.Message, "nothing was changed") {
		t.Errorf("compile error: %#v", err)
	}
	err = compileError(&tree.CompileError{Path: []string{"root", "x"}, Err: &panics.Error{Value: "index out of range [3]"}})
	if e, ok := errors.AsType[*Error](err); !ok || e.Status != http.StatusUnprocessableEntity || strings.Contains(e.Message, "index out of range") {
		t.Errorf("a panic: %#v", err)
	}
	if err := compileError(errors.New("validation")); err != nil {
		t.Errorf("a validation error is the store's: %v", err)
	}
	if err := compileError(nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}
