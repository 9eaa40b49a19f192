package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// extension is the file name ending of each output format.
var extension = map[Format]string{
	FormatLLVMText:      ".prof.txt",
	FormatLLVMExtBinary: ".prof.extbinary",
	FormatPprof:         ".pb.gz",
	FormatCapture:       ".profd",
}

// imageNameBytes is the most of an image's name its output files' names take: an
// executable's name may be 255 bytes, and a file name beside it with an output's extension
// and the temporary name it is written under must stay within the file system's 255.
const imageNameBytes = 100

// outputBase is "<image>-<pid>" for the first process of a pid in a run and
// "<image>-<pid>.<n>" for the nth (a pid reused while profd runs), with anything but
// [A-Za-z0-9._-] in the image name replaced.
func outputBase(image string, pid uint32, n int) string {
	base := outfile.SafeName(image, imageNameBytes) + "-" + strconv.FormatUint(uint64(pid), 10)
	if n > 1 {
		base += "." + strconv.Itoa(n)
	}
	return base
}

// writeOutputs writes every requested format of c into dir, each atomically, mode 0600 and
// owned by owner, and returns what it wrote (the paths, the LLVM conversion's stats, what
// each LLVM format left out) and the errors of the formats that could not be written
// (joined), or errNoFunctions alone when only the LLVM profiles were left out, having no
// function to hold, or errStopped when ctx ended the LLVM conversion first. opt is the
// conversion's: its cache keeps the output's repaired functions from one flush to the next,
// and its RepairBy bounds the time it spends repairing. The formats are written
// concurrently: the LLVM ones (which share one conversion) one after the other on the
// calling goroutine, each other on a goroutine of its own that writeOutputs waits for.
func writeOutputs(ctx context.Context, dir, base string, owner outfile.Owner, formats []Format, c *profileio.Capture, opt profgen.Options) (outputsWritten, error) {
	errs := make([]error, len(formats))
	var llvm []int // indices of the LLVM formats
	var wg sync.WaitGroup
	for i, f := range formats {
		if f == FormatLLVMText || f == FormatLLVMExtBinary {
			llvm = append(llvm, i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = writeFormat(dir, base, owner, f, c, nil)
		}()
	}
	var out outputsWritten
	if len(llvm) > 0 {
		prof, cst, err := profgen.FromCaptureContext(ctx, c, opt)
		out.llvm = cst
		if opt.Cache != nil && err == nil {
			opt.Cache.Sweep() // what this output's profile no longer holds
		}
		for _, i := range llvm {
			if err != nil {
				errs[i] = fmt.Errorf("daemon: %s of %s: %w (%w)", formats[i], base, errStopped, err)
				continue
			}
			fitted, left := fitLLVM[formats[i]](prof)
			if left.Any() {
				if out.leftOut == nil {
					out.leftOut = map[Format]profileio.LeftOut{}
				}
				out.leftOut[formats[i]] = left
			}
			if len(fitted.Functions) == 0 {
				// An LLVM profile of no function is a file llvm-profdata and clang reject.
				errs[i] = errNoFunctions
				continue
			}
			errs[i] = writeFormat(dir, base, owner, formats[i], c, fitted)
		}
	}
	wg.Wait()
	noFunctions := false
	for i, f := range formats {
		switch {
		case errs[i] == nil:
			out.paths = append(out.paths, filepath.Join(dir, base+extension[f]))
		case errors.Is(errs[i], errNoFunctions):
			noFunctions, errs[i] = true, nil
		}
	}
	err := errors.Join(errs...)
	if err == nil && noFunctions {
		err = errNoFunctions
	}
	return out, err
}

// outputsWritten is what writeOutputs wrote.
type outputsWritten struct {
	paths []string
	llvm  profgen.Stats // the LLVM conversion's
	// leftOut holds, for each LLVM format that left something out, what: the names the
	// format cannot hold (profileio.FitText, FitExtBinary); the capture and the pprof
	// profile keep them.
	leftOut map[Format]profileio.LeftOut
}

// fitLLVM leaves out of a profile what each LLVM format cannot hold.
var fitLLVM = map[Format]func(*sampleprof.Profile) (*sampleprof.Profile, profileio.LeftOut){
	FormatLLVMText: profileio.FitText, FormatLLVMExtBinary: profileio.FitExtBinary}

// repairBudget is how long the conversion of one output's capture to LLVM profiles may
// spend repairing functions anew, their hottest first: whatever code its targets hand
// over, one flush of one output is done within about this, and the functions it had no time
// for keep their raw samples in that flush's LLVM profiles (a repair of one whose samples did
// not change since is taken from the output's cache at no cost). Ten thousand sampled
// functions take about a quarter of a second.
const repairBudget = 10 * time.Second

// errStopped: the LLVM conversion was stopped (the final flush's part of the stop timeout
// ran out), so the LLVM profiles were not written (the other outputs were).
var errStopped = errors.New("stopped before the LLVM profiles were made")

// errNoFunctions: no JIT function has samples yet, so the LLVM profiles were not written (the
// other outputs were).
var errNoFunctions = errors.New("no JIT function has samples yet: the LLVM profiles are not written")

// outputPerm is every output file's mode: a profile and a capture (which holds code bytes)
// are their owner's alone.
const outputPerm = 0o600

// writeFormat writes format f of c (or, for the LLVM formats, of its conversion prof) to
// its file in dir, owned by owner.
func writeFormat(dir, base string, owner outfile.Owner, f Format, c *profileio.Capture, prof *sampleprof.Profile) error {
	var write func(io.Writer) error
	switch f {
	case FormatCapture:
		write = func(w io.Writer) error { return profileio.WriteCapture(w, c) }
	case FormatPprof:
		write = func(w io.Writer) error { return profileio.WritePprof(w, c) }
	case FormatLLVMText:
		write = func(w io.Writer) error { return profileio.WriteText(w, prof) }
	case FormatLLVMExtBinary:
		write = func(w io.Writer) error { return profileio.WriteExtBinary(w, prof) }
	default:
		return fmt.Errorf("daemon: %s of %s: unknown format %q", f, base, f)
	}
	err := outfile.WriteOwned(filepath.Join(dir, base+extension[f]), outputPerm, owner, write)
	var ee *outfile.EncodeError
	if errors.As(err, &ee) {
		return fmt.Errorf("daemon: %s of %s: %w", f, base, ee.Err)
	}
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	return nil
}

// checkWritable makes dir if it is missing (mode 0711: each target's user may reach its own
// files, no one may list or add to it) and fails early, at start, when it cannot take output
// files. An existing directory's mode is left as it is.
func checkWritable(dir string) error {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, outDirPerm); err != nil {
		return fmt.Errorf("daemon: %w: --out %s cannot be made: %w", ErrConfig, dir, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// The umask may have taken the others' search bit MkdirAll asked for.
		if err := os.Chmod(dir, outDirPerm); err != nil {
			return fmt.Errorf("daemon: --out %s: %w", dir, err)
		}
	}
	tmp, err := os.CreateTemp(dir, ".profd-write-check-*")
	if err != nil {
		return fmt.Errorf("daemon: %w: --out %s is not writable: %w", ErrConfig, dir, err)
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}

// remakeOut makes --out again when it is gone (a clean-up removed it), as profd made it at
// start, and takes its lock again, so that a profd left running writes its profiles again
// rather than failing every write until it stops. It makes the directory itself or not at
// all: when its parent is gone too, --out is not made again (what profd would make there
// may be anyone's) and one error says so, until someone makes it; then profd takes its lock.
func (d *daemonRun) remakeOut() {
	d.flushing.remakeMu.Lock()
	defer d.flushing.remakeMu.Unlock()
	d.remakeOutLocked()
}

// remakeOutLocked is remakeOut with remakeMu held; it reports whether it made --out.
func (d *daemonRun) remakeOutLocked() bool {
	dir := d.cfg.OutDir
	_, err := os.Lstat(dir)
	if err == nil && d.flushing.outGone {
		// Made again by someone else: its lock file is new, and profd takes it as it would
		// at start.
		d.flushing.outGone = false
		lock, err := lockOut(dir, d.log)
		if err != nil {
			d.log.Error("profd: --out is there again, but its lock is not profd's: another writer may replace this profd's files", "out", dir, "err", err)
			return false
		}
		d.flushing.outLock.Close()
		d.flushing.outLock = lock
		d.log.Warn("profd: --out is there again; the next flushes write there", "out", dir)
		return false
	}
	if !errors.Is(err, os.ErrNotExist) {
		return false
	}
	lock, err := makeOutAgain(dir, d.log)
	if err != nil {
		if !d.flushing.outGone {
			d.flushing.outGone = true
			d.log.Error("profd: --out was removed and is not made again: nothing is written until it is there; make it, or restart profd", "out", dir, "err", err)
		}
		return false
	}
	d.flushing.outLock.Close() // its file went with the old directory
	d.flushing.outLock, d.flushing.outGone = lock, false
	if d.cfg.FlushInterval > 0 {
		if err := makeIntervalDir(dir, d.log); err != nil {
			d.log.Warn("profd: the interval directory cannot be made again", "err", err)
		}
	}
	d.log.Warn("profd: --out was removed; made again: the profiles and intervals it held are gone, those of the next flushes are written there", "out", dir)
	return true
}

// makeOutAgain makes the directory dir, which was removed, as checkWritable made it, and
// takes its lock as at start (lockOut): it fails when anything is at dir by then or dir's
// parent is gone.
func makeOutAgain(dir string, log *slog.Logger) (*outfile.DirLock, error) {
	if err := os.Mkdir(dir, outDirPerm); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, outDirPerm); err != nil { // the umask may have taken a bit
		return nil, err
	}
	return lockOut(dir, log)
}

// outDirPerm is the mode of an --out profd makes.
const outDirPerm = 0o711

// warnOutMode says once, at start, what an existing --out's owner and mode let other users
// do to the outputs: profd never changes them.
func warnOutMode(dir string, log *slog.Logger) {
	st, err := os.Stat(dir)
	if err != nil {
		return
	}
	owner := -1
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		owner = int(sys.Uid)
	}
	switch mode := st.Mode(); {
	case mode&0o002 != 0 && mode&os.ModeSticky == 0:
		log.Warn("profd: --out is world-writable without the sticky bit: any user may delete or replace the profiles in it; give profd a directory only it writes",
			"out", dir, "mode", fmt.Sprintf("%#o", mode.Perm()))
	case owner >= 0 && owner != os.Geteuid() || mode&0o020 != 0:
		log.Warn("profd: --out belongs to another user, or its group may write it: they may replace the profiles in it, and what profd writes and deletes there (a link in place of its intervals directory); give profd a directory only it writes",
			"out", dir, "owner_uid", owner, "mode", fmt.Sprintf("%#o", mode.Perm()))
	case mode&0o001 == 0:
		log.Info("profd: --out is not searchable by other users: a target's user cannot read the profiles it is sent the paths of",
			"out", dir, "mode", fmt.Sprintf("%#o", mode.Perm()))
	}
}

// lockOut takes --out's lock, so that a second profd on the same directory stops at start
// instead of replacing the first one's files, and removes the temporary files of flushes a
// killed profd left there.
func lockOut(dir string, log *slog.Logger) (*outfile.DirLock, error) {
	lock, err := outfile.Lock(dir)
	if inUse := (*outfile.InUseError)(nil); errors.As(err, &inUse) {
		return nil, fmt.Errorf("daemon: %w: --out %s is in use by profd %s; give each profd its own --out", ErrConfig, dir, inUse.Holder)
	}
	if err != nil {
		return nil, fmt.Errorf("daemon: --out %s: %w", dir, err)
	}
	n, bytes, err := outfile.RemoveStale(dir)
	if n > 0 {
		log.Info("removed the temporary files of flushes a killed profd left", "out", dir, "files", n, "bytes", bytes)
	}
	if err != nil {
		log.Warn("temporary files of a killed profd stay", "out", dir, "err", err)
	}
	return lock, nil
}
