package fifo

import "errors"

// Errors callers can test for with errors.Is. Every error the package returns wraps one of
// these or an *os.SyscallError, with the offending path first.
var (
	// ErrUnsafeDir: the FIFO directory is not a real directory owned by profd's user with no
	// group or other write permission (or it is a symlink).
	ErrUnsafeDir = errors.New("unsafe directory")
	// ErrNotFIFO: something other than a FIFO (a symlink, a regular file, ...) sits where a
	// target's FIFO belongs, or the FIFO was replaced while profd used it.
	ErrNotFIFO = errors.New("not a FIFO")
	// ErrDirInUse: another live profd owns the directory (its profd.pid names a running profd).
	ErrDirInUse = errors.New("directory in use by another profd")
	// ErrUnusableDir: the FIFO directory cannot be made, opened or written (a read-only file
	// system, /proc, a missing parent); the error also wraps the system call's.
	ErrUnusableDir = errors.New("unusable directory")
	// ErrClosed: the Server was closed.
	ErrClosed = errors.New("fifo: server closed")
)
