package main

import (
	"flag"
	"fmt"
	"math"
	"os/user"
	"strconv"
	"strings"

	"github.com/profd/profd/daemon"
)

// registerAllFlags adds --all and its filters to fs, filling cfg.
func registerAllFlags(fs *flag.FlagSet, cfg *daemon.Config) {
	fs.BoolVar(&cfg.All, "all", false, "profile every process of the host, running now or started later, but kernel threads and profd itself (as root; excludes --pid); narrow it with --cgroup, --container, --uid, --jit-image and --exclude-image: a process must pass every kind given, and any value of a kind. Each process's samples are counted (native code named from its files' symbols; with no --jit-image, also those of a process gone before profd could add it, such as a shell's command of a few milliseconds; a container's once profd has added its first process); its JIT symbols are read when it has a jitdump or perf-map file (checked as it starts, at each scan of /proc and at its exit) and, through a FIFO, when its environment has PROFD_DIR. Its outputs are one per image and user, as with --group-by image, unless --group-by says otherwise")
	list := func(name, usage string, add func(string) error) {
		fs.Func(name, usage, func(s string) error {
			for _, f := range strings.Split(s, ",") {
				if err := add(strings.TrimSpace(f)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	list("cgroup", "with --all, only processes in the cgroup v2 `PATH` or below it, given as /proc/PID/cgroup names it (/system.slice/myapp.service) or under the hierarchy's mount (/sys/fs/cgroup/...); comma-separated or repeated. A PATH that does not exist is an error; one removed while profd runs is warned about once", func(s string) error {
		cfg.Cgroups = append(cfg.Cgroups, s)
		return nil
	})
	list("container", "with --all, only processes of the container `ID` (Docker, containerd, CRI-O, Podman: the full id or a prefix of at least 12 hex digits, as docker ps shows it); comma-separated or repeated", func(s string) error {
		cfg.Containers = append(cfg.Containers, strings.ToLower(s))
		return nil
	})
	list("uid", "with --all, only processes whose real user is `UID` (a number or a user name); comma-separated or repeated", func(s string) error {
		uid, err := parseUser(s)
		if err != nil {
			return err
		}
		cfg.UIDs = append(cfg.UIDs, uid)
		return nil
	})
	list("exclude-image", "with --all, leave out the processes running the executable `NAME` (matched by file, as --jit-image); comma-separated or repeated", func(s string) error {
		cfg.ExcludeImages = append(cfg.ExcludeImages, s)
		return nil
	})
}

// parseUser takes a user id or name to its id.
func parseUser(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		if n == math.MaxUint32 {
			return 0, fmt.Errorf("--uid %s: not a user id", s)
		}
		return uint32(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("--uid %q: no such user (give a user name or a number)", s)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("--uid %q: user id %q is not a number", s, u.Uid)
	}
	return uint32(n), nil
}
