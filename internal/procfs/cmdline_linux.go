package procfs

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// commandLineBytes and commandLineArgs bound what profd keeps of a command line
// (/proc/PID/cmdline) for each target, for the whole time it runs: a longer one is cut
// there. A process's arguments are its own to choose, up to the kernel's megabytes.
const (
	commandLineBytes = 4 << 10
	commandLineArgs  = 256
)

// CommandLine is pid's arguments as it was started or last exec'd with (argv, its program
// first), or as it rewrote them since (a server naming its role in its title shows one
// argument with spaces). A kernel thread, or a process that exited, has none. A command
// line over commandLineBytes, or of more than commandLineArgs arguments, yields its
// arguments up to there, the last one cut, and an error wrapping ErrTooLarge.
func CommandLine(pid uint32) ([]string, error) {
	data, err := readBounded(Path(pid, "cmdline"), commandLineBytes)
	if data == nil {
		return nil, fmt.Errorf("procfs: pid %d: %w", pid, err)
	}
	args := parseCommandLine(data)
	if len(args) > commandLineArgs {
		args = slices.Clip(args[:commandLineArgs])
		err = fmt.Errorf("procfs: pid %d: more than %d arguments: %w", pid, commandLineArgs, ErrTooLarge)
	}
	return args, err
}

// parseCommandLine splits a cmdline file's NUL-terminated arguments. The last one may lack
// its NUL (a process that rewrote its title, a cut read); NULs at the end are not
// arguments (nor, then, empty last arguments).
func parseCommandLine(data []byte) []string {
	data = bytes.TrimRight(data, "\x00")
	if len(data) == 0 {
		return nil
	}
	return strings.Split(string(data), "\x00")
}
