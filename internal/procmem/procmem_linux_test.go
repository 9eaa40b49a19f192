package procmem

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"unsafe"
)

func TestReadOwnMemory(t *testing.T) {
	want := []byte("\x55\x48\x89\xe5 some code bytes \xc3")
	got, err := Read(uint32(os.Getpid()), uint64(uintptr(unsafe.Pointer(&want[0]))), len(want))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %x, want %x", got, want)
	}
}

func TestReadUnmappedFails(t *testing.T) {
	_, err := Read(uint32(os.Getpid()), 8, 16)
	if err == nil {
		t.Fatal("reading address 8 succeeded")
	}
	var se *os.SyscallError
	if !errors.As(err, &se) && !errors.Is(err, ErrPartial) {
		t.Fatalf("error %v is neither a syscall error nor ErrPartial", err)
	}
}
