// Package jitmap decodes the symbol records JIT runtimes write (the Linux perf jitdump format
// and perf-map text) and keeps, per process, the code objects they describe, so that a
// sampled instruction pointer can be named: which function owned that address at that time,
// at what offset, and with what code bytes and line table.
//
// jitmap imports nothing else of profd's.
package jitmap
