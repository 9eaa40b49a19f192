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

// Stat is what profd reads of /proc/PID/stat (proc(5)), in one read.
type Stat struct {
	State byte   // field 3: R, S, D, Z (zombie), X (dead)...
	Flags uint64 // field 9: the kernel's PF_* process flags
	// Start is field 22: when the process started, in clock ticks since boot
	// (CLOCK_BOOTTIME). A pid that comes back with another start is another process.
	Start uint64
	// Parent is field 4: the process that forked it (or the one it was handed to when that
	// one exited).
	Parent uint32
	// StartCode and StartStack (fields 26 and 28) are where the program's text and main
	// stack begin: chosen at random at each exec, copied by a fork. 0 when the reader may not
	// see them, and for a kernel thread.
	StartCode, StartStack uint64
}

// ForkCopy reports whether child's address space is parent's as copied by a fork, not one
// an exec made since: the program's text and stack where the parent has them. With address
// space randomisation off (sysctl kernel.randomize_va_space=0), an exec of the parent's
// executable looks the same.
func ForkCopy(child, parent Stat) bool {
	return child.StartCode != 0 && child.StartStack != 0 &&
		child.StartCode == parent.StartCode && child.StartStack == parent.StartStack
}

// pfKthread is the kernel's PF_KTHREAD process flag.
const pfKthread = 0x00200000

// KernelThread reports whether the process is a kernel thread: it has no user memory, so it
// runs no JIT code.
func (s Stat) KernelThread() bool { return s.Flags&pfKthread != 0 }

// Exited reports whether the process is a zombie (or dead): it has exited and not been
// reaped yet.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// ReadStat reads /proc/PID/stat once.
func ReadStat(pid uint32) (Stat, error) {
	b, err := readBounded(Path(pid, "stat"), statBytes)
	if err != nil {
		return Stat{}, err
	}
	st, err := parseStat(string(b))
	if err != nil {
		return Stat{}, fmt.Errorf("procfs: /proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// parseStat parses a /proc/PID/stat line. The command (field 2) is the process's to choose,
// spaces and parentheses included: the fields are counted from its last ')'.
func parseStat(s string) (Stat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return Stat{}, errors.New("no command field")
	}
	// Fields after "pid (comm) ": field n of proc(5) is at index n-3 (state 3, ppid 4,
	// flags 9, starttime 22, startcode 26, startstack 28).
	const stateField, parentField, flagsField, startField, codeField, stackField = 0, 1, 6, 19, 23, 25
	f := strings.Fields(s[i+2:])
	if len(f) <= startField || len(f[stateField]) != 1 {
		return Stat{}, fmt.Errorf("%d fields", len(f)+2)
	}
	st := Stat{State: f[stateField][0]}
	parent, err := strconv.ParseUint(f[parentField], 10, 32)
	if err != nil {
		return Stat{}, fmt.Errorf("parent: %w", err)
	}
	st.Parent = uint32(parent)
	if st.Flags, err = strconv.ParseUint(f[flagsField], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("flags: %w", err)
	}
	if st.Start, err = strconv.ParseUint(f[startField], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("start time: %w", err)
	}
	if len(f) > stackField { // kernels of this century have them
		st.StartCode, _ = strconv.ParseUint(f[codeField], 10, 64)
		st.StartStack, _ = strconv.ParseUint(f[stackField], 10, 64)
	}
	return st, nil
}

// StartTicks returns when process pid started (Stat.Start); a zombie's is ErrExited.
func StartTicks(pid uint32) (uint64, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return 0, err
	}
	if st.Exited() {
		return 0, fmt.Errorf("procfs: pid %d: %w", pid, ErrExited)
	}
	return st.Start, nil
}

// KernelThread reports whether pid is a kernel thread (Stat.KernelThread).
func KernelThread(pid uint32) (bool, error) {
	st, err := ReadStat(pid)
	return st.KernelThread(), err
}

// StartedAt returns when process pid started, on the wall clock, to the clock tick (10 ms).
func StartedAt(pid uint32) (time.Time, error) {
	ticks, err := StartTicks(pid)
	if err != nil {
		return time.Time{}, err
	}
	return TicksTime(ticks)
}

// TicksTime is the wall time of ticks, clock ticks since boot as /proc/PID/stat counts a
// process's start (StartTicks).
func TicksTime(ticks uint64) (time.Time, error) {
	var boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return time.Time{}, os.NewSyscallError("clock_gettime", err)
	}
	now := time.Now()
	started := time.Duration(ticks) * (time.Second / clockTicksPerSecond)
	return now.Add(started - time.Duration(boot.Nano())), nil
}
