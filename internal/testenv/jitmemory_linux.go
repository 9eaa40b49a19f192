package testenv

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// JITMemory maps size bytes of anonymous executable memory in the test's process, where
// a JIT puts its code, until the test ends, and returns its address. Nothing is written
// there: tests describe code at the address, they do not run it.
func JITMemory(t testing.TB, size int) uint64 {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return uint64(uintptr(unsafe.Pointer(&mem[0])))
}
