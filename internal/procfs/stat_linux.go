package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrExited: the process is a zombie (or dead): it has exited and not been reaped yet.
var ErrExited = errors.New("procfs: process exited")

// clockTicksPerSecond is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux.
const clockTicksPerSecond = 100

// StartTicks returns field 22 of /proc/PID/stat: when process pid started, in clock ticks
// since boot (CLOCK_BOOTTIME). A pid that comes back with another start is another process.
func StartTicks(pid uint32) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
		return 0, fmt.Errorf("procfs: pid %d: %w", pid, ErrExited)
	}
	const startField = 22 - 3 // fields after "pid (comm) "
	if len(f) <= startField {
		return 0, fmt.Errorf("procfs: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	st, err := strconv.ParseUint(f[startField], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("procfs: /proc/%d/stat: start time: %w", pid, err)
	}
	return st, nil
}

// statFields returns the fields of /proc/PID/stat after "pid (comm) ": field n of proc(5)
// is at index n-3.
func statFields(pid uint32) ([]string, error) {
	b, err := readBounded(Path(pid, "stat"), statBytes)
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces and parentheses
	if i < 0 || i+2 > len(s) {
		return nil, fmt.Errorf("procfs: /proc/%d/stat: no command field", pid)
	}
	return strings.Fields(s[i+2:]), nil
}

// pfKthread is the kernel's PF_KTHREAD process flag.
const pfKthread = 0x00200000

// KernelThread reports whether pid is a kernel thread (PF_KTHREAD in field 9 of
// /proc/PID/stat): it has no user memory, so it runs no JIT code.
func KernelThread(pid uint32) (bool, error) {
	f, err := statFields(pid)
	if err != nil {
		return false, err
	}
	const flagsField = 9 - 3
	if len(f) <= flagsField {
		return false, fmt.Errorf("procfs: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	flags, err := strconv.ParseUint(f[flagsField], 10, 64)
	if err != nil {
		return false, fmt.Errorf("procfs: /proc/%d/stat: flags: %w", pid, err)
	}
	return flags&pfKthread != 0, nil
}

// StartedAt returns when process pid started, on the wall clock, to the clock tick (10 ms).
func StartedAt(pid uint32) (time.Time, error) {
	ticks, err := StartTicks(pid)
	if err != nil {
		return time.Time{}, err
	}
	var boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return time.Time{}, os.NewSyscallError("clock_gettime", err)
	}
	now := time.Now()
	started := time.Duration(ticks) * (time.Second / clockTicksPerSecond)
	return now.Add(started - time.Duration(boot.Nano())), nil
}
