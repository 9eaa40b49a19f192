module github.com/profd/profd

go 1.26.0

require (
	github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe
	golang.org/x/sys v0.49.0
)
