package outfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// LockName is the file in an output directory whose lock says which process writes there.
const LockName = ".profd.lock"

// ErrInUse reports an output directory another process holds the lock of.
var ErrInUse = errors.New("directory in use")

// InUseError names the holder of a directory's lock; it wraps ErrInUse.
type InUseError struct {
	Dir    string
	Holder string // "pid N", or "another process" when the lock file names none
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("outfile: %s: %v (held by %s)", e.Dir, ErrInUse, e.Holder)
}
func (e *InUseError) Unwrap() error { return ErrInUse }

// DirLock is the exclusive right to write a directory's output files; Close gives it up.
type DirLock struct{ f *os.File }

// Lock takes dir's lock (an flock on dir/LockName, which holds the holder's pid), so that two
// writers never replace each other's files. When another process holds it, the error is an
// *InUseError naming that process's pid. The lock goes with the process: one that was killed
// holds none.
func Lock(dir string) (*DirLock, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("outfile: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &InUseError{Dir: dir, Holder: holder}
		}
		return nil, fmt.Errorf("outfile: %s: %w", path, os.NewSyscallError("flock", err))
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f}, nil
}

// Close releases the lock. The lock file stays: removing it could let a second writer lock
// a new file while a third still holds the old one.
func (l *DirLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close()
	l.f = nil
	return err
}

// staleTemp matches the temporary files Write makes (".NAME.tmp-DIGITS"); a writer killed
// before its rename leaves one behind.
var staleTemp = regexp.MustCompile(`^\..+\.tmp-[0-9]+$`)

// RemoveStale removes the temporary files writers that died left in dir, and returns how
// many it removed and their bytes. Call it holding dir's lock: any such file is then
// another, dead, writer's.
func RemoveStale(dir string) (n int, bytes int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("outfile: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !staleTemp.MatchString(e.Name()) {
			continue
		}
		info, ierr := e.Info()
		if rerr := os.Remove(filepath.Join(dir, e.Name())); rerr != nil {
			if !errors.Is(rerr, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("outfile: %w", rerr))
			}
			continue
		}
		n++
		if ierr == nil {
			bytes += info.Size()
		}
	}
	return n, bytes, errors.Join(errs...)
}
