package files

import "errors"

// ErrNotRegular: a jitdump or perf-map file of a target is a symlink, not a regular file,
// or owned by neither the target's user nor root; it is not read.
var ErrNotRegular = errors.New("not a regular file of the target's user")

// ErrNotReadable: a target's jitdump or perf-map file is one its user may not read (a root-only
// file bind-mounted where its perf map belongs); it is not read.
var ErrNotReadable = errors.New("not readable by the target's user")

// errNoRoot: a file in a target's namespace is not looked at while its root directory cannot
// be opened (the process is exiting, or profd may not look into it); it is tried again.
var errNoRoot = errors.New("the process's root is not open")
