package targets

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/profd/profd/internal/procfs"
	"golang.org/x/sys/unix"
)

// ErrNoImage is returned by New for an image given as a path that names no executable file.
var ErrNoImage = errors.New("no such executable")

// image is one --jit-image: the executable file it names, and the name processes of it have.
type image struct {
	arg  string // as given: a base name or an absolute path
	name string // the base name of the executable it resolves to (lli for lli-14), or arg
	file fileID // the executable's identity; zero when arg is a name no file on PATH has
	// script is the file arg resolved to when that is a script (#!): no process runs a
	// script as its executable (its interpreter is), so im matches by name, as one PATH
	// lacks.
	script string
}

// fileID identifies a file whatever its path: a process of the image runs this file.
type fileID = procfs.FileID

// resolveImage resolves arg: an absolute path to its file, a base name through PATH (as a
// shell would run it). A name PATH lacks is matched by the base name of processes'
// executables alone (a JIT started from its build directory, one in a container only), and
// so is one that resolves to a script (pyenv's and asdf's shims on PATH run the real
// executable, which has the same name, elsewhere).
func resolveImage(arg string) (image, error) {
	im := image{arg: arg, name: arg}
	path := arg
	if !filepath.IsAbs(arg) {
		p, err := exec.LookPath(arg)
		if err != nil || !filepath.IsAbs(p) {
			return im, nil
		}
		path = p
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return im, fmt.Errorf("targets: --jit-image %s: %w", arg, ErrNoImage)
	}
	id, ok := statID(real)
	if !ok {
		return im, fmt.Errorf("targets: --jit-image %s: %w", arg, ErrNoImage)
	}
	if isScript(real) {
		im.name, im.script = filepath.Base(arg), real
		return im, nil
	}
	im.name, im.file = filepath.Base(real), id
	return im, nil
}

// isScript reports whether the file at path begins with "#!".
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [2]byte
	_, err = io.ReadFull(f, b[:])
	return err == nil && string(b[:]) == "#!"
}

// statID returns the identity of the file at path (following symlinks).
func statID(path string) (fileID, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, false
	}
	return fileID{Dev: st.Dev, Ino: st.Ino}, true
}

// executable is what the watcher reads of the file a process runs, at one time: its base
// name (as the /proc/PID/exe link names it, without " (deleted)"), identity and owner.
// name is "" when it cannot be read (the process exited, or is exiting).
type executable struct {
	name string
	id   fileID
	uid  uint32
}

// readExecutable reads what process pid runs. The link is opened once, and the name and the
// identity read from that one open file: read one after the other from /proc/PID/exe, an
// exec between the two would pair the old program's name with the new one's file.
func readExecutable(pid uint32) executable {
	fd, err := unix.Open(procfs.Path(pid, "exe"), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return executable{}
	}
	defer unix.Close(fd)
	st, err := procfs.StatNoSync(fd, "") // the file's server, were it FUSE's, is not asked
	if err != nil {
		return executable{}
	}
	path, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return executable{}
	}
	return executable{name: filepath.Base(strings.TrimSuffix(path, " (deleted)")), id: procfs.StatxID(&st), uid: st.Uid}
}

// runs reports whether process pid, which runs exe, runs im. A resolved image matches the
// process that runs its very file; in a mount namespace of its own (a container) a process
// whose executable has the image's name matches when root owns that executable, as the
// host's does. A name PATH lacks matches by the executable's base name. Never by comm: any
// process may set its own (prctl PR_SET_NAME), and a user's copy of a binary renamed to
// the image's name runs another file.
func (im *image) runs(pid uint32, exe executable, hostMounts string) bool {
	if exe.name == "" {
		return false
	}
	if im.file == (fileID{}) {
		return exe.name == im.name
	}
	if exe.id == im.file {
		return true
	}
	if exe.name != im.name && exe.name != im.arg || exe.uid != 0 || hostMounts == "" {
		return false
	}
	mnt, err := os.Readlink(procfs.Path(pid, "ns/mnt"))
	return err == nil && mnt != hostMounts
}

// ranFile reports whether a process that ran the file at path, whose identity is id, ran
// im: its very file, or for an image matched by name, a file of that name. It cannot tell
// a container's own copy of a resolved image (runs matches that by /proc).
func (im *image) ranFile(path string, id fileID) bool {
	if im.file == (fileID{}) {
		return path != "" && filepath.Base(path) == im.name
	}
	return id == im.file
}

// describe says what im matches, for the log.
func (im *image) describe() string {
	if im.script != "" {
		return "processes whose executable is named " + im.name + " (" + im.arg + " is the script " + im.script +
			", which no process runs as its executable; give the executable it runs, by path, to match that file alone)"
	}
	if im.file == (fileID{}) {
		return "processes whose executable is named " + im.name + " (not on PATH)"
	}
	if strings.Contains(im.arg, "/") || im.arg == im.name {
		return "processes running " + im.name + " (this file, or a root-owned one of its name in a container)"
	}
	return "processes running " + im.arg + " (" + im.name + ", or a root-owned one of its name in a container)"
}
