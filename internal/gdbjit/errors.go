package gdbjit

import "errors"

var (
	// ErrNoDescriptor: the process maps no executable or libLLVM exporting
	// __jit_debug_descriptor, so it has no GDB JIT interface profd can read.
	ErrNoDescriptor = errors.New("gdbjit: no __jit_debug_descriptor")
	// ErrBadList: the descriptor or its entry list holds something no JIT writes (an unknown
	// version, a cycle, too many entries, an object too large).
	ErrBadList = errors.New("gdbjit: bad jit_code_entry list")
)
