#!/usr/bin/env bash
# Checks for the external tools profd's tests and demo use. As root with apt it installs the
# missing Debian packages; otherwise it stops at once and says what to install.
set -euo pipefail

# Go itself comes first: Debian's golang package is far older than the 1.26 go.mod needs.
if ! command -v go >/dev/null 2>&1; then
	echo "profd: no go on PATH; install Go 1.26 or later (https://go.dev/dl/) and put it on PATH" >&2
	exit 1
fi

# tool:package pairs (Debian bookworm names); a tool that starts with / is a file (glob) to find.
needs=(
	gcc:gcc
	objcopy:binutils
	nm:binutils
	strip:binutils
	xz:xz-utils
	/usr/share/doc/libc6-dbg/copyright:libc6-dbg
	clang-14:clang-14
	clang++-14:clang-14
	llvm-config-14:llvm-14-dev
	/usr/lib/llvm-14/include/llvm/ExecutionEngine/Orc/LLJIT.h:llvm-14-dev
	/usr/include/c++/*/vector:libstdc++-12-dev
	lli-14:llvm-14
	llc-14:llvm-14
	opt-14:llvm-14
	llvm-profdata-14:llvm-14
	perf:linux-perf
	valgrind:valgrind
	/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.profile-x86_64.a:libclang-rt-14-dev
	/usr/include/bpf/bpf_helpers.h:libbpf-dev
	/usr/include/linux/bpf.h:linux-libc-dev
	node:nodejs
	java:openjdk-17-jdk-headless
	javac:openjdk-17-jdk-headless
	jcmd:openjdk-17-jdk-headless
	/usr/lib/postgresql/*/bin/postgres:postgresql
	psql:postgresql-client
	perl:perl
	unshare:util-linux
	runuser:util-linux
	erl:erlang-base
	erlc:erlang-base
	php:php8.2-cli
	/usr/sbin/php-fpm*:php8.2-fpm
	cgi-fcgi:libfcgi-bin
	mono:mono-runtime
	mcs:mono-mcs
)

missing=()
for pair in "${needs[@]}"; do
	tool=${pair%%:*} pkg=${pair#*:}
	case $tool in
	/*) compgen -G "$tool" >/dev/null || missing+=("$pkg") ;;
	*) command -v "$tool" >/dev/null 2>&1 || missing+=("$pkg") ;;
	esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "profd: missing tools; install these packages: ${missing[*]}" >&2
	echo "  (Debian/Ubuntu: sudo apt-get install -y ${missing[*]})" >&2
	exit 1
fi
echo "profd: installing ${missing[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq "${missing[@]}" >/dev/null; then
	apt-get update -qq
	apt-get install -y -qq "${missing[@]}" >/dev/null
fi
