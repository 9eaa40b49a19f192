package daemon

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/profd/profd/internal/targets"
)

// validateAll checks --all and its filters.
func (c *Config) validateAll(bad func(format string, args ...any)) {
	if !c.All {
		if len(c.Cgroups)+len(c.Containers)+len(c.UIDs)+len(c.ExcludeImages) > 0 {
			bad("--cgroup, --container, --uid and --exclude-image filter --all: give --all with them")
		}
		return
	}
	if len(c.Pids) > 0 {
		bad("--pid and --all exclude each other: --all profiles every process (narrow it with --cgroup, --container, --uid, --jit-image)")
	}
	if os.Geteuid() != 0 {
		bad("--all needs root: it samples every process with per-CPU events and reads every process's /proc")
	}
	for _, cg := range c.Cgroups {
		if err := targets.CheckCgroup(cg); err != nil {
			bad("%v", err)
		}
	}
	for _, id := range c.Containers {
		if err := targets.CheckContainer(id); err != nil {
			bad("%v", err)
		}
	}
	for _, image := range c.ExcludeImages {
		if image == "" || strings.Contains(image, "/") && !filepath.IsAbs(image) {
			bad("--exclude-image %q: want an executable's name, such as bash, or its absolute path", image)
		}
	}
}
