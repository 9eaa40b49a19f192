package targets

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/profd/profd/internal/procfs"
	"golang.org/x/sys/unix"
)

// ErrNoCgroup is returned by New for a Filter cgroup that does not exist in the cgroup v2
// hierarchy.
var ErrNoCgroup = errors.New("no such cgroup v2 directory")

// MinContainerPrefix is the shortest container id prefix a Filter takes (as docker ps shows
// ids).
const MinContainerPrefix = 12

// Filter narrows Config.All: a process is a target when it passes every kind of condition
// given (AND across kinds) and, within a kind, any of its values (OR). An empty kind
// admits every process.
type Filter struct {
	// Cgroups are cgroup v2 directories, as a path under the hierarchy's mount
	// (/sys/fs/cgroup/system.slice/x.service) or as /proc/PID/cgroup names them
	// (/system.slice/x.service): a process is in one when its cgroup is it or below it.
	Cgroups []string
	// Containers are container ids, 64 hex digits or a prefix of at least
	// MinContainerPrefix, matched against the id the process's cgroup names
	// (procfs.ContainerID).
	Containers []string
	UIDs       []uint32 // real user ids
	// ExcludeImages are executables, as Config.Images: a process that runs one is no target.
	ExcludeImages []string
}

// cgroupDir is one Filter cgroup: its path as /proc/PID/cgroup names it, and where it is
// on profd's file system.
type cgroupDir struct {
	rel, dir string
}

// filter is a Filter resolved by New, with what it warned of.
type filter struct {
	cgroups    []cgroupDir
	containers []string
	uids       []uint32
	exclude    []image

	// mount is where profd has the cgroup v2 hierarchy, "" when it has none (then containers
	// are told by their v1 cgroups alone).
	mount string

	mu       sync.Mutex
	gone     map[string]bool     // cgroups found missing at a scan (warned once)
	seenIDs  map[string][]string // container prefix -> the ids it matched
	warnedID map[string]bool
	// containerCgroups are the cgroup v2 paths of the containers whose processes passed,
	// until a scan finds them gone (see cgroupIDs); found is set when one is added.
	containerCgroups map[string]bool
	found            bool
}

func newFilter(f Filter) (*filter, error) {
	r := &filter{uids: f.UIDs, gone: map[string]bool{}, seenIDs: map[string][]string{}, warnedID: map[string]bool{},
		containerCgroups: map[string]bool{}}
	if len(f.Cgroups)+len(f.Containers) > 0 {
		mount, err := cgroup2Mount()
		if err != nil && len(f.Cgroups) > 0 {
			return nil, err
		}
		r.mount = mount
	}
	for _, arg := range f.Cgroups {
		c, err := resolveCgroup(r.mount, arg)
		if err != nil {
			return nil, err
		}
		r.cgroups = append(r.cgroups, c)
	}
	for _, id := range f.Containers {
		if err := checkContainerPrefix(id); err != nil {
			return nil, err
		}
		r.containers = append(r.containers, strings.ToLower(id))
	}
	for _, arg := range f.ExcludeImages {
		im, err := resolveImage(arg)
		if err != nil {
			return nil, fmt.Errorf("targets: --exclude-image %s: %w", arg, ErrNoImage)
		}
		r.exclude = append(r.exclude, im)
	}
	return r, nil
}

// checkContainerPrefix accepts 12 to 64 hex digits.
func checkContainerPrefix(id string) error {
	if len(id) < MinContainerPrefix || len(id) > 64 || strings.Trim(strings.ToLower(id), "0123456789abcdef") != "" {
		return fmt.Errorf("--container %q: want a container id, %d to 64 hex digits (docker ps shows 12)", id, MinContainerPrefix)
	}
	return nil
}

// CheckContainer reports whether id is a container id or prefix a Filter takes.
func CheckContainer(id string) error { return checkContainerPrefix(id) }

// cgroup2Mount is where profd's mount namespace has the cgroup v2 hierarchy
// (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("--cgroup: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER"
		fields := strings.Fields(sc.Text())
		if i := slices.Index(fields, "-"); i > 4 && i+1 < len(fields) && fields[i+1] == "cgroup2" && fields[3] == "/" {
			return fields[4], nil
		}
	}
	return "", fmt.Errorf("--cgroup: no cgroup v2 hierarchy is mounted: %w", ErrNoCgroup)
}

// resolveCgroup takes a --cgroup argument, under mount or relative to it, to its path as
// /proc/PID/cgroup names it; the directory must exist.
func resolveCgroup(mount, arg string) (cgroupDir, error) {
	p := filepath.Clean(arg)
	if !filepath.IsAbs(p) {
		return cgroupDir{}, fmt.Errorf("--cgroup %s: want an absolute path, such as /system.slice/NAME.service or %s/system.slice/NAME.service", arg, mount)
	}
	rel := p
	switch {
	case p == mount:
		rel = "/"
	case strings.HasPrefix(p, mount+"/"):
		rel = strings.TrimPrefix(p, mount)
	case p == "/sys/fs/cgroup" || strings.HasPrefix(p, "/sys/fs/cgroup/"):
		return cgroupDir{}, fmt.Errorf("--cgroup %s: not in the cgroup v2 hierarchy, which is mounted at %s: %w", arg, mount, ErrNoCgroup)
	}
	dir := filepath.Join(mount, rel)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return cgroupDir{}, fmt.Errorf("--cgroup %s: %s does not exist: %w", arg, dir, ErrNoCgroup)
	}
	return cgroupDir{rel: rel, dir: dir}, nil
}

// under reports whether cgroup path is c or below it.
func (c cgroupDir) under(path string) bool {
	return c.rel == "/" || path == c.rel || strings.HasPrefix(path, c.rel+"/")
}

// byCgroup reports whether the filter looks at processes' cgroups, which change without a
// notification (a process moved to another cgroup).
func (f *filter) byCgroup() bool { return len(f.cgroups) > 0 || len(f.containers) > 0 }

// admits reports whether process pid (not a kernel thread, not profd: the caller checks)
// passes the filter; exe is what it runs. The cheapest reads come first.
func (f *filter) admits(pid uint32, exe executable, hostMounts string) bool {
	if len(f.uids) > 0 {
		st, err := procfs.ReadStatus(pid)
		if err != nil || st.RealUID < 0 || !slices.Contains(f.uids, uint32(st.RealUID)) {
			return false
		}
	}
	if f.byCgroup() {
		cg, _ := procfs.ReadCgroup(pid)
		if len(f.cgroups) > 0 && (cg.V2 == "" || !slices.ContainsFunc(f.cgroups, func(c cgroupDir) bool { return c.under(cg.V2) })) {
			return false
		}
		if len(f.containers) > 0 {
			id := procfs.ContainerID(cg.Path)
			if id == "" || !f.containerMatches(id, procfs.ContainerCgroup(cg.V2)) {
				return false
			}
		}
	}
	if len(f.exclude) > 0 && exe.name == "" {
		return false // exiting: what it ran cannot be told, so it may run an excluded image
	}
	return !f.excludes(pid, exe, hostMounts)
}

// excludes reports whether process pid, which runs exe, runs one of the excluded images.
func (f *filter) excludes(pid uint32, exe executable, hostMounts string) bool {
	return slices.ContainsFunc(f.exclude, func(im image) bool { return im.runs(pid, exe, hostMounts) })
}

// containerMatches reports whether container id has one of the prefixes, noting which ids
// each prefix matched (see warnings) and the container's cgroup v2 path, v2 ("" when it
// has none), for cgroupIDs.
func (f *filter) containerMatches(id, v2 string) bool {
	ok := false
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.containers {
		if strings.HasPrefix(id, p) {
			ok = true
			if !slices.Contains(f.seenIDs[p], id) {
				f.seenIDs[p] = append(f.seenIDs[p], id)
			}
		}
	}
	if ok && v2 != "" && f.mount != "" && !f.containerCgroups[v2] {
		f.containerCgroups[v2] = true
		f.found = true
	}
	return ok
}

// takeFound reports whether a container's cgroup was added since the last call.
func (f *filter) takeFound() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	found := f.found
	f.found = false
	return found
}

// cgroupIDs returns the ids (inode numbers) of the cgroup v2 directories whose processes
// pass the cgroup and container filters, as far as they are known: each --cgroup directory
// as it is now (one made again has a new id); with containers, the cgroup of each matching
// container a process of was seen in (within a --cgroup directory, when both are given; a
// container found gone is forgotten). nil without either filter.
func (f *filter) cgroupIDs() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var paths []string
	switch {
	case len(f.containers) == 0:
		for _, g := range f.cgroups {
			paths = append(paths, g.rel)
		}
	case len(f.cgroups) == 0:
		for c := range f.containerCgroups {
			paths = append(paths, c)
		}
	default:
		// A process in both is in the deeper of the two directories.
		for c := range f.containerCgroups {
			for _, g := range f.cgroups {
				if g.under(c) {
					paths = append(paths, c)
				} else if (cgroupDir{rel: c}).under(g.rel) {
					paths = append(paths, g.rel)
				}
			}
		}
	}
	var ids []uint64
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(f.mount, p), &st); err != nil {
			delete(f.containerCgroups, p) // the container is gone; a --cgroup's warning comes from warnings
			continue
		}
		ids = append(ids, st.Ino)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// warnings returns what the filter has to warn of since it was last asked, each once: a
// --cgroup directory removed or renamed (no process can be in it), a --container prefix
// that matched several containers.
func (f *filter) warnings() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.cgroups {
		_, err := os.Stat(c.dir)
		switch missing := err != nil; {
		case missing && !f.gone[c.rel]:
			f.gone[c.rel] = true
			out = append(out, fmt.Sprintf("--cgroup %s: %s is gone (removed or renamed): no process is in it until it is made again", c.rel, c.dir))
		case !missing:
			delete(f.gone, c.rel)
		}
	}
	for p, ids := range f.seenIDs {
		if len(ids) > 1 && !f.warnedID[p] {
			f.warnedID[p] = true
			out = append(out, fmt.Sprintf("--container %s: the prefix matches several containers (%s); all of them are profiled: give more digits to pick one", p, strings.Join(ids, ", ")))
		}
	}
	return out
}

// CheckCgroup reports whether arg names an existing cgroup v2 directory (errors wrap
// ErrNoCgroup).
func CheckCgroup(arg string) error {
	mount, err := cgroup2Mount()
	if err != nil {
		return err
	}
	_, err = resolveCgroup(mount, arg)
	return err
}
