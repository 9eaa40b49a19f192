module github.com/profd/profd

go 1.24
