package bpf

// The committed profile_bpf{el,eb}.{go,o} come from this line; `make generate` reruns it.
// clang-14 and llvm-strip-14 are pinned so every machine emits the same objects.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror" -target bpfel,bpfeb profile profile.c -- -I/usr/include/x86_64-linux-gnu
