module github.com/profd/profd

go 1.24.0

require golang.org/x/arch v0.24.0
