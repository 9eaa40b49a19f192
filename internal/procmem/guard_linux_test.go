package procmem

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/clock"
)

// TestGuardReads: f's reads through Guard's read return the process's memory, and an
// unreadable address fails with no bytes, as Read does (a walk that takes the bytes of a
// read it lets fail would read zeros as entries).
func TestGuardReads(t *testing.T) {
	want := []byte("bytes a walk reads one after another")
	pid := uint32(os.Getpid())
	var got, bad []byte
	var readErr, badErr error
	if _, err := Guard(pid, func(read ReadFunc) {
		got, readErr = read(uint64(uintptr(unsafe.Pointer(&want[0]))), len(want))
		bad, badErr = read(8, 16)
	}); err != nil {
		t.Fatal(err)
	}
	if readErr != nil || !bytes.Equal(got, want) {
		t.Errorf("read %q, %v; want %q", got, readErr, want)
	}
	if badErr == nil || bad != nil {
		t.Errorf("reading address 8: %x, %v; want no bytes and an error", bad, badErr)
	}
}

// TestGuardCPU: Guard returns the CPU time f took on its thread, not the time f waited.
func TestGuardCPU(t *testing.T) {
	const burn = 30 * time.Millisecond
	pid := uint32(os.Getpid())
	cpu, err := Guard(pid, func(ReadFunc) {
		for start := clock.ThreadCPU(); clock.ThreadCPU()-start < burn; {
		}
	})
	if err != nil || cpu < burn {
		t.Errorf("f used %v of CPU: Guard says %v, %v", burn, cpu, err)
	}
	cpu, err = Guard(pid, func(ReadFunc) { time.Sleep(burn) })
	if err != nil || cpu >= burn/2 {
		t.Errorf("f slept %v: Guard says %v of CPU, %v; want under %v", burn, cpu, err, burn/2)
	}
}

// TestStalledRead: a read of memory whose page fault nobody answers (a userfaultfd
// registration its process never serves, as a FUSE server that keeps a request does) ends
// with ErrStalled after ReadTimeout; the process's reads then fail at once, without waiting,
// until the read left waiting ends; then they are made again.
func TestStalledRead(t *testing.T) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	answer := registerMissing(t, mem)
	addr := uint64(uintptr(unsafe.Pointer(&mem[0])))
	pid := uint32(os.Getpid())

	start := time.Now()
	_, err = Read(pid, addr, 64)
	if took := time.Since(start); !errors.Is(err, ErrStalled) || took < ReadTimeout {
		t.Fatalf("a read nobody answers: %v after %v; want ErrStalled after %v", err, took, ReadTimeout)
	}
	start = time.Now()
	other := []byte("another range of the same process")
	rs := []Range{{Addr: uint64(uintptr(unsafe.Pointer(&other[0]))), Buf: make([]byte, len(other))}}
	ReadEach(pid, rs)
	if took := time.Since(start); !errors.Is(rs[0].Err, ErrStalled) || took > ReadTimeout/2 {
		t.Errorf("while a read is left waiting: %v after %v; want ErrStalled at once", rs[0].Err, took)
	}
	if _, err := Guard(pid, func(ReadFunc) { t.Error("f ran while a read of its process is left waiting") }); !errors.Is(err, ErrStalled) {
		t.Errorf("Guard while a read is left waiting: %v, want ErrStalled", err)
	}

	answer()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ReadEach(pid, rs)
		if rs[0].Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the fault was answered: %v", rs[0].Err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !bytes.Equal(rs[0].Buf, other) {
		t.Errorf("read %q, want %q", rs[0].Buf, other)
	}
}

// registerMissing registers mem with a new userfaultfd for its missing pages, which nobody
// reads: a fault in mem waits until answer closes it (the page then reads as zeros). It
// skips the test where userfaultfd is not allowed (vm.unprivileged_userfaultfd=0 without
// CAP_SYS_PTRACE).
func registerMissing(t *testing.T, mem []byte) (answer func()) {
	t.Helper()
	// From linux/userfaultfd.h: _IOWR(0xAA, 0x3F, struct uffdio_api) and
	// _IOWR(0xAA, 0x00, struct uffdio_register).
	const (
		uffdAPI             = 0xAA
		uffdioAPI           = 0xC018AA3F
		uffdioRegister      = 0xC020AA00
		registerModeMissing = 1
	)
	fd, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
	if errno != 0 {
		t.Skipf("userfaultfd: %v", errno)
	}
	api := [3]uint64{uffdAPI, 0, 0} // api, features, ioctls
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, uffdioAPI, uintptr(unsafe.Pointer(&api))); errno != 0 {
		unix.Close(int(fd))
		t.Fatalf("UFFDIO_API: %v", errno)
	}
	reg := [4]uint64{uint64(uintptr(unsafe.Pointer(&mem[0]))), uint64(len(mem)), registerModeMissing, 0} // start, len, mode, ioctls
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, uffdioRegister, uintptr(unsafe.Pointer(&reg))); errno != 0 {
		unix.Close(int(fd))
		t.Fatalf("UFFDIO_REGISTER: %v", errno)
	}
	var once sync.Once
	answer = func() { once.Do(func() { unix.Close(int(fd)) }) }
	t.Cleanup(answer)
	return answer
}
