// Package procmem reads another process's memory with process_vm_readv(2), so the code
// bytes of a JIT function announced without them (a perf-map line) can be kept while the
// process is alive. ReadEach reads many ranges with one system call: a perf map read from
// its start announces hundreds of functions at once.
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
	r := []Range{{Addr: addr, Buf: make([]byte, size)}}
	ReadEach(pid, r)
	if r[0].Err != nil {
		return nil, r[0].Err
	}
	return r[0].Buf, nil
}

// Range is one read of ReadEach: len(Buf) bytes at Addr into Buf. Err is set when they
// could not all be read.
type Range struct {
	Addr uint64
	Buf  []byte
	Err  error
}

// maxIovecs is the most ranges one process_vm_readv(2) takes (the kernel's IOV_MAX).
const maxIovecs = 1024

// ReadEach reads each of rs from process pid, as Read does, with one system call for up to
// 1024 ranges: a range that cannot be read wholly ends the call, and the next call begins
// after it.
func ReadEach(pid uint32, rs []Range) {
	local := make([]unix.Iovec, 0, min(len(rs), maxIovecs))
	remote := make([]unix.RemoteIovec, 0, cap(local))
	for i := 0; i < len(rs); {
		local, remote = local[:0], remote[:0]
		for _, r := range rs[i:min(len(rs), i+maxIovecs)] {
			if len(r.Buf) == 0 {
				break
			}
			v := unix.Iovec{Base: &r.Buf[0]}
			v.SetLen(len(r.Buf))
			local = append(local, v)
			remote = append(remote, unix.RemoteIovec{Base: uintptr(r.Addr), Len: len(r.Buf)})
		}
		if len(local) == 0 { // an empty range: nothing to read
			i++
			continue
		}
		n, err := unix.ProcessVMReadv(int(pid), local, remote, 0)
		if err != nil { // the first range is not readable
			rs[i].Err = fmt.Errorf("procmem: pid %d %#x+%d: %w", pid, rs[i].Addr, len(rs[i].Buf), os.NewSyscallError("process_vm_readv", err))
			i++
			continue
		}
		read := 0
		for read < len(local) && n >= len(rs[i].Buf) {
			n -= len(rs[i].Buf)
			read++
			i++
		}
		if read < len(local) { // the call stopped in range i
			rs[i].Err = fmt.Errorf("procmem: pid %d %#x+%d: got %d bytes: %w", pid, rs[i].Addr, len(rs[i].Buf), n, ErrPartial)
			i++
		}
	}
}
