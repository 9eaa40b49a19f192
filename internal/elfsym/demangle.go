package elfsym

import "github.com/ianlancetaylor/demangle"

// Demangle returns the C++ or Rust source name of a mangled symbol, with its parameters,
// or name itself when it is not mangled (C) or cannot be demangled.
func Demangle(name string) string {
	if len(name) < 2 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R') {
		return name
	}
	return demangle.Filter(name)
}
