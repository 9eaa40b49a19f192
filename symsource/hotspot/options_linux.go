package hotspot

import (
	"path/filepath"
	"strings"

	"github.com/profd/profd/internal/procfs"
)

// isHotSpot reports whether a process's mappings are a HotSpot JVM's: it maps libjvm.so
// and no OpenJ9 library (OpenJ9 has a libjvm.so too, attaches otherwise, and writes a
// javacore file at SIGQUIT).
func isHotSpot(maps []procfs.Mapping) bool {
	jvm := false
	for _, m := range maps {
		switch base := filepath.Base(m.Path); {
		case base == "libjvm.so":
			jvm = true
		case strings.HasPrefix(base, "libj9vm"):
			return false
		}
	}
	return jvm
}

// attachDisabled reports whether the JVM of process pid was started with its attach
// mechanism disabled (-XX:+DisableAttachMechanism), as its options say: JAVA_TOOL_OPTIONS,
// JDK_JAVA_OPTIONS, its command line, then _JAVA_OPTIONS, the last setting winning, as
// HotSpot reads them. Such a JVM prints a thread dump at SIGQUIT. A setting in a flags file
// (-XX:Flags=, .hotspotrc) is not seen.
func attachDisabled(pid uint32) bool {
	args, _ := procfs.CommandLine(pid)
	env, _ := procfs.Environ(pid, "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
	return disablesAttach(strings.Fields(env["JAVA_TOOL_OPTIONS"]), strings.Fields(env["JDK_JAVA_OPTIONS"]),
		args, strings.Fields(env["_JAVA_OPTIONS"]))
}

// disablesAttach reports whether the last DisableAttachMechanism setting among lists, in
// order, turns it on.
func disablesAttach(lists ...[]string) bool {
	disabled := false
	for _, list := range lists {
		for _, opt := range list {
			switch opt {
			case "-XX:+DisableAttachMechanism":
				disabled = true
			case "-XX:-DisableAttachMechanism":
				disabled = false
			}
		}
	}
	return disabled
}
