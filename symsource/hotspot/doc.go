// Package hotspot asks HotSpot JVMs to write their perf maps (/tmp/perf-PID.map), as
// `jcmd PID Compiler.perfmap` does (JDK 17 and later), through the JVM's attach mechanism:
// a request on the UNIX socket /tmp/.java_pidPID of its attach listener, which a JVM starts
// when it gets SIGQUIT while the file /tmp/.attach_pidPID exists (OpenJ9, which attaches
// otherwise, is not asked). HotSpot writes its map only when asked, so a profiler that asks
// names the samples of a running JVM's compiled code; package files reads the map the JVM
// writes.
//
//	a := hotspot.NewAsker(logger, 30*time.Second)
//	wrote := a.Ask(ctx, targets, false) // every second: the JVMs due; the pids whose JVMs wrote maps
//	a.Ask(ctx, targets, true)           // at the stop: every JVM
//	a.Renew(pid)                        // from any goroutine: pid exec'd, perhaps into a JVM
package hotspot
