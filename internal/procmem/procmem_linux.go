// Package procmem reads another process's memory with process_vm_readv(2), so the code
// bytes of a JIT function announced without them (a perf-map line) can be kept while the
// process is alive.
package procmem

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrPartial: only part of the range was readable (some of it is unmapped or unreadable).
var ErrPartial = errors.New("procmem: partial read")

// Read returns size bytes at addr in process pid. It needs ptrace-attach rights over pid
// (same user and not forbidden by Yama, or CAP_SYS_PTRACE).
func Read(pid uint32, addr uint64, size int) ([]byte, error) {
	if size <= 0 {
		return nil, nil
	}
	buf := make([]byte, size)
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(size)
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: size}}
	n, err := unix.ProcessVMReadv(int(pid), local, remote, 0)
	if err != nil {
		return nil, fmt.Errorf("procmem: pid %d %#x+%d: %w", pid, addr, size, os.NewSyscallError("process_vm_readv", err))
	}
	if n != size {
		return nil, fmt.Errorf("procmem: pid %d %#x+%d: got %d bytes: %w", pid, addr, size, n, ErrPartial)
	}
	return buf, nil
}
